-- Who created each eval schedule (the principal's user), so an end user lists only its own schedules.
ALTER TABLE eval_schedules ADD COLUMN creator text;
-- Schedules created before: read from the record's text. Not with JSON operators, which turn every string of
-- the record into text and refuse U+0000 in an input; user ids are printable ASCII, escaped only as \" and \\.
UPDATE eval_schedules
   SET creator = regexp_replace(substring(record::text from '"creator":\{"user":"((?:[^"\\]|\\.)*)"'), '\\(.)', '\1', 'g');
-- An organization's live schedules of one creator, newest first (an end user's list).
CREATE INDEX eval_schedules_creator ON eval_schedules (org, creator, seq DESC) WHERE deleted_at IS NULL;
