-- Settlements of holds drawn from an escrow slice (lib/messaging/quota-escrow.ts).

-- Answers (position in p_items, settled | already_resolved). An item with `escrow` was held from
-- that escrow slice (lib/messaging/quota-escrow.ts): it has no row of its own, so quota_settle
-- records it settled, and the slice gives up what it held in the same transaction (a slice with
-- nothing left is released).
CREATE OR REPLACE FUNCTION quota_settle_batch(p_items JSONB)
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
    IF outcome = 'settled' AND rec.item ? 'escrow' THEN
      UPDATE "quota_reservations"
         SET "tokens" = GREATEST("tokens" - (rec.item->>'held')::BIGINT, 0),
             "status" = CASE WHEN "tokens" - (rec.item->>'held')::BIGINT <= 0 THEN 'released' ELSE "status" END,
             "resolvedAt" = CASE WHEN "tokens" - (rec.item->>'held')::BIGINT <= 0 THEN now() ELSE "resolvedAt" END
       WHERE "operationKey" = rec.item->>'escrow' AND "status" = 'pending';
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;
