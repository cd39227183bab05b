import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ErrorObject } from 'openai/resources/shared';

/**
 * The wire types of the official `openai` package that the conformance schemas are generated
 * from (test/support/openai-conformance.ts), under names of their own so that the generator
 * finds them and nothing else called `Response`. Nothing here is written by hand but the error
 * body: the package types the error object, and its client reads it from the body's `error`.
 */
export type OpenAIResponse = Response;
export type OpenAIResponseStreamEvent = ResponseStreamEvent;
export type OpenAIChatCompletion = ChatCompletion;
export type OpenAIChatCompletionChunk = ChatCompletionChunk;
export interface OpenAIErrorBody {
  error: ErrorObject;
}
