-- Refresh token rotation: every token belongs to the family of one sign-in;
-- a refresh retires the token it used and adds the next one to the family.
-- Presenting a retired token again revokes the whole family (reuse).
ALTER TABLE refresh_tokens ADD COLUMN family TEXT NOT NULL DEFAULT '';
ALTER TABLE refresh_tokens ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;
-- Tokens from before rotation: each one its own family.
UPDATE refresh_tokens SET family = 'single-' || id WHERE family = '';
CREATE INDEX refresh_tokens_family ON refresh_tokens(family);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens(expires_ms);
