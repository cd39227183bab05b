CREATE OR REPLACE FUNCTION budget_settle_batch(p_items JSONB)
RETURNS TABLE (idx BIGINT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
    ORDER BY (SELECT r."knowledgeBaseId" FROM "budget_reservations" r WHERE r."operationKey" = e.item->>'operation_key') NULLS FIRST, e.ord
  LOOP
    idx := rec.ord;
    outcome := budget_settle(
      rec.item->>'operation_key', (rec.item->>'characters')::BIGINT, (rec.item->>'input_tokens')::BIGINT,
      (rec.item->>'output_tokens')::BIGINT, (rec.item->>'cost')::NUMERIC, rec.item->>'model',
      (rec.item->>'fallback')::BOOLEAN, (rec.item->>'rejected')::BOOLEAN);
    RETURN NEXT;
  END LOOP;
END $$;
