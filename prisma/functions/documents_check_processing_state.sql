-- The columns always describe one state: what the derived processing_error needs is there, and
-- nothing of another state is left behind. (A trigger, not a CHECK constraint: the offline schema
-- engine cannot read check constraints back, see scripts/prisma-schema-engine.mjs.) It runs only
-- for statements that write one of the four columns.
CREATE OR REPLACE FUNCTION documents_check_processing_state() RETURNS TRIGGER LANGUAGE plpgsql AS $$
DECLARE
  consistent BOOLEAN := CASE NEW."processingState"
    WHEN 'budget_blocked' THEN NEW."budgetBlockReason" IS NOT NULL AND NEW."budgetBlockDetail" IS NOT NULL AND NEW."failureMessage" IS NULL
    WHEN 'failed' THEN NEW."failureMessage" IS NOT NULL AND NEW."budgetBlockReason" IS NULL AND NEW."budgetBlockDetail" IS NULL
    ELSE NEW."budgetBlockReason" IS NULL AND NEW."budgetBlockDetail" IS NULL AND NEW."failureMessage" IS NULL
  END;
BEGIN
  IF NOT consistent THEN
    RAISE EXCEPTION 'document %: processing state % does not match its reason, detail and failure message', NEW."id", coalesce(NEW."processingState"::text, 'null')
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
