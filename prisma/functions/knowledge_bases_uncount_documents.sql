CREATE OR REPLACE FUNCTION knowledge_bases_uncount_documents() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "partners" SET "documentCount" = "documentCount" - (SELECT count(*)::int FROM "documents" WHERE "knowledgeBaseId" = OLD."id")
  WHERE "id" = OLD."partnerId";
  RETURN OLD;
END $$;
