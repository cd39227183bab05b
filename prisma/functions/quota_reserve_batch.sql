-- Answers (position in p_requests, outcome, token_amount, remaining).
CREATE OR REPLACE FUNCTION quota_reserve_batch(p_requests JSONB)
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
