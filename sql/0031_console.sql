-- `payrecon console`: who is signed in, and what they did.
--
-- A session is kept under the SHA-256 of its cookie's token, never the token itself: reading this table does not
-- give a usable session. `last_seen` moves with each request; a session idle past the console's timeout, or older than
-- its longest life, is over.
CREATE TABLE console_sessions (
    token_sha256  bytea       PRIMARY KEY,
    user_name     text        NOT NULL,
    role          text        NOT NULL CHECK (role IN ('viewer', 'operator')),
    csrf_token    text        NOT NULL,
    -- SHA-256 of the password hash it was opened with: a new password ends the session.
    credential    text        NOT NULL,
    address       text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_last_seen ON console_sessions (last_seen);

-- Every write made in the console (and each sign-in and sign-out): who, when, from where, what, on what.
CREATE TABLE console_audit (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    user_name   text        NOT NULL,
    address     text,
    action      text        NOT NULL,
    target      text,
    detail      text
);
CREATE INDEX console_audit_target ON console_audit (target) WHERE target IS NOT NULL;
