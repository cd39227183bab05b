import crypto from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { Db } from '../lib/platform/db.js';
import type { Config } from '../lib/platform/config.js';
import type { FileStorage } from '../lib/platform/storage.js';
import { documentFiles } from '../lib/platform/storage.js';
import { holdBeforeDispatch, markUncertain, release, settle } from '../lib/budget/ledger.js';
import { LlmCallFailed, classifyLlmError, type ChatCallResult, type ChatModel } from '../lib/providers/llm.js';
import { beginRewriteAttempt, clearBudgetBlock, finishRewriteAttempt, recordRewritePass } from '../lib/knowledge/state.js';
import { countCharacters } from '../lib/platform/text.js';
import { EventLoopTurns } from '../lib/platform/turns.js';
import { localPromptTokens, partMessages, renderPrompt, splitIntoParts, type RewritePart } from '../lib/rewrite/parts.js';
import { callBound, costUsd, rewriteTotals, type RewritePass } from '../lib/rewrite/usage.js';
import { validatePartOutput } from '../lib/rewrite/output-validation.js';
import { resolveContentType } from '../lib/rewrite/content-types.js';
import type { RewriteCallOutcome, RewritePlan, RewriteRequest } from '../lib/contracts/document-pipeline.js';
import { loadLiveDocument, permanentFailure } from './live-document.js';
import { heartbeating } from './heartbeating.js';

export interface RewriteActivityDeps {
  db: Db;
  storage: FileStorage;
  config: Pick<Config, 'rewrite' | 'modelPrices' | 'openaiBaseUrl'>;
  chatModel: ChatModel | null;
}

/** The plan as stored with the attempt: everything a call needs, fixed for the attempt's life. */
interface StoredPlan {
  systemPrompt: string;
  parts: RewritePart[];
  maxOutputTokens: number;
  models: string[];
}

interface CallInput {
  documentId: string;
  attemptId: string;
  part: number;
  model: string;
  fallback: boolean;
  operationKey: string;
}

const opFile = (operationKey: string) => crypto.createHash('sha256').update(operationKey).digest('hex').slice(0, 32);

export function createRewriteActivities({ db, storage, config, chatModel }: RewriteActivityDeps) {
  const attemptDir = (documentId: string, attemptId: string) => documentFiles.rewriteAttempt(documentId, attemptId);
  const files = {
    plan: (d: string, a: string) => `${attemptDir(d, a)}/plan.json`,
    answer: (d: string, a: string, key: string) => `${attemptDir(d, a)}/answer-${opFile(key)}.json`,
    part: (d: string, a: string, part: number) => `${attemptDir(d, a)}/part-${part}.md`,
    rejectedPart: (d: string, a: string, part: number) => `${attemptDir(d, a)}/part-${part}.rejected.md`,
  };

  const loadDocument = (documentId: string) => loadLiveDocument(db, documentId);

  const readPlan = async (documentId: string, attemptId: string): Promise<StoredPlan> => JSON.parse(await storage.readText(files.plan(documentId, attemptId)));

  return {
    /**
     * Starts a rewrite attempt: resolves the content type and prompt, splits the digitized text
     * into parts and fixes the plan in storage, so every retry of the attempt sends the same
     * prompts. The document's rewrite statistics start over (they describe the latest attempt).
     */
    async planRewrite({ documentId, attemptId, contentType, personName }: { documentId: string; attemptId: string } & RewriteRequest): Promise<RewritePlan> {
      // Splitting and counting a large text takes seconds: heartbeats go on meanwhile.
      return heartbeating(async () => {
        const doc = await loadDocument(documentId);
        if (!chatModel) {
          throw permanentFailure('rewriting needs an OpenAI-compatible model API: set OPENAI_BASE_URL (and OPENAI_API_KEY), then send the retry signal');
        }
        if (!doc.fileDigitized) throw permanentFailure('the document has no digitized content to rewrite');
        const resolved = resolveContentType(contentType, doc);
        const models = [config.rewrite.models[doc.modelTier === 'economy' ? 'economy' : 'standard']];
        if (config.rewrite.fallbackModel && config.rewrite.fallbackModel !== models[0]) models.push(config.rewrite.fallbackModel);

        let plan: StoredPlan;
        if (await storage.exists(files.plan(documentId, attemptId))) {
          plan = await readPlan(documentId, attemptId);
        } else {
          const template = await db.rewritePrompt.findUnique({ where: { contentType: resolved } });
          if (!template) throw permanentFailure(`no rewrite prompt is configured for content type ${resolved}`);
          const text = await storage.readText(documentFiles.digitized(documentId));
          const parts = await splitIntoParts(text, config.rewrite.partTokens, config.rewrite.overlapTokens);
          if (parts.length === 0) throw permanentFailure('the digitized content is empty');
          plan = {
            systemPrompt: renderPrompt(template.prompt, personName || doc.expertName || doc.knowledgeBase.expertName),
            parts,
            maxOutputTokens: config.rewrite.maxOutputTokens,
            models,
          };
          await storage.write(files.plan(documentId, attemptId), JSON.stringify(plan));
        }
        await beginRewriteAttempt(db, documentId);

        const bounds: RewritePlan['bounds'] = {};
        const turns = new EventLoopTurns();
        for (const model of plan.models) {
          bounds[model] = [];
          for (const [i, part] of plan.parts.entries()) {
            const { messages } = partMessages(plan.systemPrompt, part, i, plan.parts.length);
            bounds[model].push(callBound(localPromptTokens(messages), plan.maxOutputTokens, config.modelPrices[model]));
            await turns.give();
          }
        }
        return { knowledgeBaseId: doc.knowledgeBaseId, contentType: resolved, partCount: plan.parts.length, models: plan.models, bounds, maxOutageSeconds: config.rewrite.maxOutageSeconds };
      });
    },

    /**
     * One admitted provider call for one part. The answer is kept in storage before its usage is
     * settled, so a retry after a crash settles and records it without calling again. A retry that
     * finds the hold still pending and no answer cannot know whether the provider did the work: the
     * operation becomes uncertain. Usage is settled whether the output is accepted or rejected.
     */
    async callRewriteModel({ documentId, attemptId, part, model, fallback, operationKey }: CallInput): Promise<RewriteCallOutcome> {
      await loadDocument(documentId);
      if (!chatModel) return { outcome: 'permanent', message: 'rewriting needs an OpenAI-compatible model API (OPENAI_BASE_URL)', retryAfterMs: null };
      const plan = await readPlan(documentId, attemptId);
      const source = plan.parts[part]!;
      const { messages, overheadMessages } = partMessages(plan.systemPrompt, source, part, plan.parts.length);
      const answerKey = files.answer(documentId, attemptId, operationKey);
      const ctx = Context.current();
      // Admitted: a block shown while this call waited for capacity is over.
      await clearBudgetBlock(db, documentId);

      let answer: ChatCallResult;
      if (await storage.exists(answerKey)) {
        answer = JSON.parse(await storage.readText(answerKey));
      } else {
        const hold = await holdBeforeDispatch(db, operationKey, ctx.info.attempt, 'provider call');
        if (hold === 'lost') return { outcome: 'ambiguous', message: 'the worker was lost during the model call; its usage is unknown', retryAfterMs: null };
        if (hold.status !== 'pending') throw new Error(`reservation ${operationKey} is ${hold.status} before its call`);
        const beat = setInterval(() => ctx.heartbeat(), 5_000);
        try {
          answer = await chatModel.complete({ model, messages, maxOutputTokens: plan.maxOutputTokens, timeoutMs: config.rewrite.timeoutSeconds * 1000, signal: ctx.cancellationSignal });
        } catch (err) {
          const failure = err instanceof LlmCallFailed ? err : classifyLlmError(err);
          if (failure.kind === 'ambiguous') await markUncertain(db, operationKey, failure.message);
          else await release(db, operationKey, failure.message);
          if (ctx.cancellationSignal.aborted) throw err;
          return { outcome: failure.kind, message: failure.message, retryAfterMs: failure.retryAfterMs };
        } finally {
          clearInterval(beat);
        }
        await storage.write(answerKey, JSON.stringify(answer));
      }

      const rejection = validatePartOutput(source.text, answer.content, answer.finishReason);
      const price = config.modelPrices[model];
      const cost = answer.usage && price ? costUsd(price, answer.usage.promptTokens, answer.usage.outputTokens) : null;
      await settle(db, operationKey, {
        inputTokens: answer.usage?.promptTokens ?? null,
        outputTokens: answer.usage?.outputTokens ?? null,
        costUsd: cost,
        model,
        fallback,
        rejected: rejection !== null,
      });
      // A rejected answer is kept for the draft, unless it is empty and an earlier one said something.
      const keep = rejection ? files.rejectedPart(documentId, attemptId, part) : files.part(documentId, attemptId, part);
      if (!rejection || answer.content.trim() || !(await storage.exists(keep))) await storage.write(keep, answer.content.trim());
      const overhead = localPromptTokens(overheadMessages);
      await recordRewritePass(db, documentId, (passes) => {
        const first = !passes.some((p) => p.part === part);
        return {
          pass: passes.length + 1,
          part,
          part_count: plan.parts.length,
          model_name: model,
          fallback,
          first_pass: first,
          prompt_tokens: answer.usage?.promptTokens ?? null,
          output_tokens: answer.usage?.outputTokens ?? null,
          ...(first ? { prompt_overhead_tokens: overhead, source_input_tokens: answer.usage ? Math.max(0, answer.usage.promptTokens - overhead) : null } : {}),
          finish_reason: answer.finishReason,
          rejected: rejection !== null,
          ...(rejection ? { rejection_reason: rejection } : {}),
          cost_usd: cost === null ? null : Number(cost),
          operation_key: operationKey,
        };
      });
      return rejection ? { outcome: 'rejected', message: rejection } : { outcome: 'accepted' };
    },

    /**
     * Ends an attempt. Accepted: the parts joined become the draft and, as every part passed
     * validation, the final rewritten content, which queues embedding. Rejected: what the model
     * wrote is kept as the draft for inspection and the final content is left as it was. Either
     * way the attempt's totals and completion time are recorded.
     */
    async finishRewrite({ documentId, attemptId, rejected }: { documentId: string; attemptId: string; rejected?: string }): Promise<{ charCount: number }> {
      const doc = await loadDocument(documentId);
      // A retry after the attempt was finished and its work files removed: nothing left to do.
      if (!(await storage.exists(files.plan(documentId, attemptId)))) return { charCount: doc.draftRewriteCharCount ?? 0 };
      const plan = await readPlan(documentId, attemptId);
      const outputs: string[] = [];
      for (let i = 0; i < plan.parts.length; i++) {
        const accepted = files.part(documentId, attemptId, i);
        const refused = files.rejectedPart(documentId, attemptId, i);
        if (await storage.exists(accepted)) outputs.push(await storage.readText(accepted));
        else if (rejected && (await storage.exists(refused))) outputs.push(await storage.readText(refused));
        else if (!rejected) throw new Error(`part ${i} of attempt ${attemptId} has no accepted output`);
      }
      const text = outputs.filter((o) => o.trim()).join('\n\n');
      const charCount = countCharacters(text);
      const passes = (doc.rewriteInputTokensPasses as unknown as RewritePass[]) ?? [];
      const totals = rewriteTotals(passes);
      // The tier's model, unless the fallback wrote an accepted part (or, when rejected, the last answer).
      const decisive = passes.find((p) => p.fallback && !p.rejected) ?? (rejected ? passes.at(-1) : undefined);
      const model = decisive?.model_name ?? plan.models[0]!;

      if (text) await storage.write(documentFiles.rewrittenDraft(documentId), text);
      if (!rejected) await storage.write(documentFiles.rewritten(documentId), text);
      await finishRewriteAttempt(db, doc, {
        rejected: Boolean(rejected),
        draft: text ? { charCount } : null,
        record: {
          rewriteModel: model,
          rewriteProvider: config.openaiBaseUrl ? new URL(config.openaiBaseUrl).host : null,
          rewriteProviderInferred: false,
          rewriteInputTokensTotal: totals.rewriteInputTokensTotal,
          rewriteOutputTokens: totals.rewriteOutputTokens,
          rewriteCostUsd: totals.rewriteCostUsd === null ? null : totals.rewriteCostUsd.toFixed(8),
          inputFileTokens: totals.inputFileTokens,
          rewriteCompletedAt: new Date(),
        },
      });
      await storage.removePrefix(attemptDir(documentId, attemptId));
      return { charCount };
    },
  };
}

export type RewriteActivities = ReturnType<typeof createRewriteActivities>;
