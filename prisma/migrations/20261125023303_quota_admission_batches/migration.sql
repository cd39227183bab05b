-- Group commit of quota-key admission (lib/messaging/quota.ts, lib/platform/group-commit.ts), as
-- budget admission has it: the holds and the settlements that arrive while one batch of their kind
-- is in flight go together as the next, in one round trip and one commit, each decided exactly as
-- quota_reserve / quota_settle decide it alone. The keys' rows are locked in ascending order, so
-- two batches never wait for each other in a cycle. A batch of holds commits as quota_reserve does
-- (without waiting for the WAL flush); a batch of settlements is durable and shares one flush.
-- Every lookup is a single-row index probe (no join of the request list with a table), whatever the
-- size of quota_reservations.

-- Answers (position in p_requests, outcome, token_amount, remaining).
CREATE FUNCTION quota_reserve_batch(p_requests JSONB)
RETURNS TABLE (idx BIGINT, outcome TEXT, token_amount BIGINT, remaining BIGINT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
  decision RECORD;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS e(item, ord)
    ORDER BY (e.item->>'quota_key_id')::UUID, e.ord
  LOOP
    SELECT * INTO decision FROM quota_reserve(
      (rec.item->>'quota_key_id')::UUID, rec.item->>'operation_key', rec.item->>'endpoint',
      (rec.item->>'tokens')::BIGINT, (rec.item->>'hold_ms')::BIGINT);
    idx := rec.ord; outcome := decision.outcome; token_amount := decision.token_amount; remaining := decision.remaining;
    RETURN NEXT;
  END LOOP;
END $$;

-- Answers (position in p_items, settled | already_resolved).
CREATE FUNCTION quota_settle_batch(p_items JSONB)
RETURNS TABLE (idx BIGINT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
    ORDER BY COALESCE((e.item->>'quota_key_id')::UUID,
                      (SELECT r."quotaKeyId" FROM "quota_reservations" r WHERE r."operationKey" = e.item->>'operation_key')) NULLS FIRST, e.ord
  LOOP
    idx := rec.ord;
    outcome := quota_settle(rec.item->>'operation_key', (rec.item->>'used')::BIGINT, (rec.item->>'quota_key_id')::UUID,
                            (rec.item->>'held')::BIGINT, rec.item->>'endpoint');
    RETURN NEXT;
  END LOOP;
END $$;
