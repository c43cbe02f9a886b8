-- When each expiring grant written through the gateway or the service ends (a share with an end, the owner of
-- content that expires), by the resource's token key (`<type>:<org>/<id>`). A check's decision is kept only
-- until the first of these after it was asked; they lived in Redis, one sorted set per resource for as long
-- as its content, and now live here beside the content. Rows whose time has passed are pruned by the
-- retention sweep.

CREATE TABLE authz_grant_expiries (
  resource_key text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (resource_key, expires_at)
);

CREATE INDEX authz_grant_expiries_by_time ON authz_grant_expiries (expires_at);
