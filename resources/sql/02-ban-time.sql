-- Ledger schema version 2: when each ban was made, so that a ban can expire (core/node/rules/bans.h,
-- kBanExpiryMs) and a restarted node reloads only the bans still in force. A ban recorded before
-- this version has no time: its row's last_seen is the best one known (the ban is at least that old
-- or younger), so it expires no later than a ban made then.
ALTER TABLE peers ADD COLUMN banned_at INTEGER;
UPDATE peers SET banned_at = last_seen WHERE banned = 1;
