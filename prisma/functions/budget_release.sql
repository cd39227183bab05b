-- release and markUncertain in one round trip each, taking the KB row lock before the hold's row
-- as settle does (the trigger then moves the counters on the locked row), so that no two of them
-- can wait for each other in a cycle. true when the hold was pending and changed.
CREATE OR REPLACE FUNCTION budget_release(p_operation_key TEXT, p_note TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  kb_id UUID;
BEGIN
  SELECT "knowledgeBaseId" INTO kb_id FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF NOT FOUND THEN RETURN FALSE; END IF;
  PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb_id FOR UPDATE;
  UPDATE "budget_reservations" SET "status" = 'released', "note" = p_note, "resolvedAt" = now()
   WHERE "operationKey" = p_operation_key AND "status" = 'pending';
  RETURN FOUND;
END $$;
