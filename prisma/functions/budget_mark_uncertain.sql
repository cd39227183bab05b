CREATE OR REPLACE FUNCTION budget_mark_uncertain(p_operation_key TEXT, p_note TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  kb_id UUID;
BEGIN
  SELECT "knowledgeBaseId" INTO kb_id FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF NOT FOUND THEN RETURN FALSE; END IF;
  PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb_id FOR UPDATE;
  UPDATE "budget_reservations" SET "status" = 'uncertain', "note" = p_note
   WHERE "operationKey" = p_operation_key AND "status" = 'pending';
  RETURN FOUND;
END $$;
