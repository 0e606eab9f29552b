-- User management: a user can be disabled (cannot sign in; their tokens
-- stop working), and every user has a token generation. Tokens carry the
-- generation they were issued under; raising it (disable, password reset)
-- ends every token issued before, at once and exactly.
ALTER TABLE users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN token_generation INTEGER NOT NULL DEFAULT 0;
