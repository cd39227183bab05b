-- CreateTable
CREATE TABLE "rewrite_prompts" (
    "contentType" TEXT NOT NULL,
    "prompt" TEXT NOT NULL,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "rewrite_prompts_pkey" PRIMARY KEY ("contentType")
);

-- Default prompts. {person_name} is replaced by the request's person_name (or the document's
-- expert name, or "the author"); the source text follows as the user message.
INSERT INTO "rewrite_prompts" ("contentType", "prompt", "updatedAt") VALUES
('article', 'You rewrite web articles into clean reference text for a knowledge base written in the voice of {person_name}.
Keep every fact, number, name, date and instruction of the source; drop navigation, adverts, cookie notices, share buttons and other page furniture.
Organise the text with Markdown headings (##) and short paragraphs; keep lists and tables as Markdown.
Write in the language of the source. Do not add facts, opinions or a summary that is not in the source.
Answer with the rewritten text only, without an introduction or closing remark.', CURRENT_TIMESTAMP),
('video', 'You rewrite transcripts of spoken video or audio by {person_name} into clean reference text for a knowledge base.
Remove filler words, false starts, repetitions, timestamps and greetings to the audience; fix obvious transcription errors only where the meaning is certain.
Keep every piece of advice, fact, number, example and story, in the first person of {person_name}.
Organise the text with Markdown headings (##) by topic and short paragraphs.
Write in the language of the transcript. Do not add anything that was not said.
Answer with the rewritten text only, without an introduction or closing remark.', CURRENT_TIMESTAMP),
('book', 'You rewrite a section of a book or long document by {person_name} into clean reference text for a knowledge base.
Keep the structure of chapters and sections as Markdown headings, and every argument, fact, number, definition, example and quotation.
Remove page numbers, running headers and footers, hyphenation at line breaks and other artefacts of digitization.
The section may start or end mid-sentence because the book is processed in overlapping parts: rewrite what is there without inventing the missing context.
Write in the language of the source. Do not summarise and do not add anything.
Answer with the rewritten text only, without an introduction or closing remark.', CURRENT_TIMESTAMP);
