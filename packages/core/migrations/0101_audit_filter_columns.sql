-- The acting user and the action as columns of their own, which the trail's filters compare, so that no
-- read parses `record`: PostgreSQL's JSON operators turn every string of a record into text, which cannot
-- hold U+0000 or a lone surrogate, so one record holding either (a tool name) failed every filtered read
-- of its organization. `record` keeps every field exactly as it was sent (JSON escapes them).
ALTER TABLE audit_records ADD COLUMN actor text, ADD COLUMN action text;

-- Rows written before: read from their record, with the escapes PostgreSQL cannot turn into text replaced
-- by U+FFFD's (six characters for six, so the JSON stays valid; a user id and an action hold neither).
UPDATE audit_records a
   SET actor = r.safe->'actor'->>'userId', action = r.safe->>'action'
  FROM (
    SELECT seq,
           regexp_replace(record::text, '\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})', '\\ufffd', 'g')::json AS safe
      FROM audit_records
  ) r
 WHERE a.seq = r.seq;
