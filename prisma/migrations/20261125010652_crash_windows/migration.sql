-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "pipelineRequest" JSONB;

-- AlterTable
ALTER TABLE "legacy_completions" ADD COLUMN     "dispatchedAt" TIMESTAMP(3);
