-- Quota keys of the messaging interface: admitted | revoked | exhausted, with the key's numbers.
-- The hold is committed without waiting for the WAL flush (synchronous_commit off for this one
-- transaction): it sits before a request's first byte, and a durable commit costs a flush (about
-- 3 ms on the development VMs). The WAL writer flushes it within wal_writer_delay, as does the
-- next durable commit; a PostgreSQL crash inside that window can lose the hold, never the usage:
-- quota_settle is durable and charges a request whose hold it cannot find (lib/messaging/quota.ts).
CREATE OR REPLACE FUNCTION quota_reserve(
  p_key UUID, p_operation_key TEXT, p_endpoint TEXT, p_tokens BIGINT, p_hold_ms BIGINT
) RETURNS TABLE (outcome TEXT, token_amount BIGINT, remaining BIGINT) LANGUAGE plpgsql AS $$
DECLARE
  k "quota_keys";
  held BIGINT;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  SELECT * INTO k FROM "quota_keys" WHERE "id" = p_key FOR UPDATE;
  IF NOT FOUND OR k."revokedAt" IS NOT NULL THEN RETURN QUERY SELECT 'revoked'::TEXT, NULL::BIGINT, NULL::BIGINT; RETURN; END IF;
  SELECT COALESCE(sum("tokens"), 0) INTO held FROM "quota_reservations"
   WHERE "quotaKeyId" = p_key AND "status" = 'pending' AND "expiresAt" > now();
  IF p_tokens > k."tokenAmount" - k."tokensConsumed" - held THEN
    RETURN QUERY SELECT 'exhausted'::TEXT, k."tokenAmount", k."tokenAmount" - k."tokensConsumed" - held; RETURN;
  END IF;
  INSERT INTO "quota_reservations" ("id", "quotaKeyId", "operationKey", "endpoint", "tokens", "expiresAt")
  VALUES (gen_random_uuid(), p_key, p_operation_key, p_endpoint, p_tokens, now() + p_hold_ms * INTERVAL '1 millisecond');
  RETURN QUERY SELECT 'admitted'::TEXT, k."tokenAmount", k."tokenAmount" - k."tokensConsumed" - held - p_tokens;
END $$;
