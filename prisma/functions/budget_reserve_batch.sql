CREATE OR REPLACE FUNCTION budget_reserve_batch(p_requests JSONB)
RETURNS TABLE (idx BIGINT, admitted BOOLEAN, reservation_id UUID, reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
  decision RECORD;
  kb UUID;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS e(item, ord)
    ORDER BY (e.item->>'knowledge_base_id')::UUID, e.ord
  LOOP
    idx := rec.ord;
    kb := (rec.item->>'knowledge_base_id')::UUID;
    -- Locked here (ascending order); budget_reserve's own FOR UPDATE then finds the lock held.
    PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb FOR UPDATE;
    IF NOT FOUND THEN
      admitted := FALSE; reservation_id := NULL; reason := 'missing_knowledge_base'; detail := 'knowledge base ' || (rec.item->>'knowledge_base_id') || ' does not exist';
      RETURN NEXT;
      CONTINUE;
    END IF;
    SELECT * INTO decision FROM budget_reserve(
      kb, rec.item->>'operation_key', rec.item->>'workflow_id', (rec.item->>'document_id')::UUID, rec.item->>'category',
      (rec.item->>'characters')::BIGINT, (rec.item->>'tokens')::BIGINT, (rec.item->>'dollars')::NUMERIC,
      (rec.item->>'request_character_limit')::BIGINT, (rec.item->>'require_headroom')::BOOLEAN);
    admitted := decision.admitted; reservation_id := decision.reservation_id; reason := decision.reason; detail := decision.detail;
    RETURN NEXT;
  END LOOP;
END $$;
