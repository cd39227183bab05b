-- A document's waiting states become typed columns (lib/knowledge/state.ts); processing_error, which
-- the API still answers with the same strings, is derived from them instead of being stored.

-- CreateEnum
CREATE TYPE "DocumentProcessingState" AS ENUM ('budget_blocked', 'failed');

-- CreateEnum
CREATE TYPE "BudgetBlockReason" AS ENUM ('character_limit_exhausted', 'token_limit_exhausted', 'dollar_limit_exhausted', 'request_character_limit', 'unknown_historical_usage', 'unresolved_provider_outcome');

-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "budgetBlockDetail" TEXT,
ADD COLUMN     "budgetBlockReason" "BudgetBlockReason",
ADD COLUMN     "failureMessage" TEXT,
ADD COLUMN     "processingState" "DocumentProcessingState";

-- Existing rows: `BUDGET_BLOCKED:<reason>: <detail>` is a budget block; any other processing_error
-- is a failure whose message is kept verbatim. A block whose reason is not a known one (none is
-- written) stays readable as a failure with the same text, so no document changes what it shows.
UPDATE "documents" SET
  "processingState" = 'budget_blocked',
  "budgetBlockReason" = b.reason::"BudgetBlockReason",
  "budgetBlockDetail" = b.detail
FROM (SELECT "id",
             split_part(substr("processingError", 16), ': ', 1) AS reason,
             substr("processingError", 16 + length(split_part(substr("processingError", 16), ': ', 1)) + 2) AS detail
      FROM "documents"
      WHERE starts_with("processingError", 'BUDGET_BLOCKED:')
        AND substr("processingError", 16) LIKE '%: %') b
WHERE "documents"."id" = b."id"
  AND b.reason IN (SELECT unnest(enum_range(NULL::"BudgetBlockReason"))::text);

UPDATE "documents" SET "processingState" = 'failed', "failureMessage" = "processingError"
WHERE "processingError" IS NOT NULL AND "processingState" IS NULL;

-- The columns always describe one state: what the derived processing_error needs is there, and
-- nothing of another state is left behind. (A trigger, not a CHECK constraint: the offline schema
-- engine cannot read check constraints back, see scripts/prisma-schema-engine.mjs.) It runs only
-- for statements that write one of the four columns.
CREATE FUNCTION documents_check_processing_state() RETURNS TRIGGER LANGUAGE plpgsql AS $$
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

CREATE TRIGGER documents_processing_state BEFORE INSERT OR UPDATE OF "processingState", "budgetBlockReason", "budgetBlockDetail", "failureMessage" ON "documents"
  FOR EACH ROW EXECUTE FUNCTION documents_check_processing_state();

ALTER TABLE "documents" DROP COLUMN "processingError";
