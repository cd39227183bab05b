-- Settles a quota hold once (unknown usage: charged the whole hold): settled | already_resolved.
-- A hold that is not there at all (lost in a PostgreSQL crash, see quota_reserve) is recorded as
-- settled now, on the key and with the size the caller gives, so no used token goes uncharged.
CREATE OR REPLACE FUNCTION quota_settle(p_operation_key TEXT, p_used BIGINT, p_key UUID, p_held BIGINT, p_endpoint TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  key_id UUID;
  used BIGINT;
BEGIN
  UPDATE "quota_reservations" SET "status" = 'settled', "usedTokens" = COALESCE(p_used, "tokens"), "resolvedAt" = now()
   WHERE "operationKey" = p_operation_key AND "status" = 'pending'
   RETURNING "quotaKeyId", "usedTokens" INTO key_id, used;
  IF NOT FOUND THEN
    IF p_key IS NULL OR EXISTS (SELECT 1 FROM "quota_reservations" WHERE "operationKey" = p_operation_key) THEN RETURN 'already_resolved'; END IF;
    key_id := p_key;
    used := COALESCE(p_used, p_held);
    INSERT INTO "quota_reservations" ("id", "quotaKeyId", "operationKey", "endpoint", "tokens", "status", "usedTokens", "expiresAt", "resolvedAt")
    VALUES (gen_random_uuid(), p_key, p_operation_key, p_endpoint, p_held, 'settled', used, now(), now());
  END IF;
  UPDATE "quota_keys" SET "tokensConsumed" = "tokensConsumed" + used, "lastUsedAt" = now() WHERE "id" = key_id;
  RETURN 'settled';
END $$;
