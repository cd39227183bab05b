import type { ChatMessage } from '../providers/llm.js';
import type { DialogAnalysisRequest } from './request.js';

/** An earlier answer of this generation that did not conform, and what was wrong with it. */
export interface RejectedAnswer {
  /** What the model said (its answer text, or its refusal). */
  answer: string;
  /** One problem per line, `<path>: <message>`. */
  errors: string;
}

/**
 * The messages of one model call: the task and both schemas (system), the current profile and the
 * dialog (user), then each earlier rejected answer of this generation followed by what was wrong
 * with it, so the model corrects its answer instead of starting over. The word "JSON" is in the
 * system message, which JSON mode requires.
 */
export function analysisMessages(input: DialogAnalysisRequest, schemas: { profile: unknown; feedback: unknown }, rejected: RejectedAnswer[]): ChatMessage[] {
  const system = [
    'You analyse a dialog and answer with one JSON object with exactly two members, "profile" and "feedback".',
    '',
    '"profile": the profile of the person in the "user" role, updated from the dialog. Start from the current profile;',
    'change a field only where the dialog supports the change, keep what the dialog does not contradict, and fill in',
    'what the dialog reveals. It must conform to this JSON Schema:',
    JSON.stringify(schemas.profile),
    '',
    `"feedback": feedback on the dialog, written in this language: ${input.language}. It must conform to this JSON Schema:`,
    JSON.stringify(schemas.feedback),
    '',
    'Answer with the JSON object only, no other text.',
    ...(input.prompt_extra_text.trim() ? ['', 'Additional instructions:', input.prompt_extra_text] : []),
  ].join('\n');
  const user = [
    'Current profile (JSON):',
    JSON.stringify(input.current_profile),
    '',
    'Dialog (JSON array of messages, in order):',
    JSON.stringify(input.messages),
  ].join('\n');
  const messages: ChatMessage[] = [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ];
  for (const r of rejected) {
    messages.push({ role: 'assistant', content: r.answer });
    messages.push({ role: 'user', content: `Your answer does not conform to the schemas:\n${r.errors
        .split('\n')
        .map((line) => `- ${line}`)
        .join('\n')}\nAnswer again with the complete, corrected JSON object.` });
  }
  return messages;
}
