import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { strToU8, unzipSync, zipSync } from 'fflate';

/**
 * A local GPU job service speaking the RunPod serverless queue protocol, controllable per test:
 * `POST /run` `{input}` → `{id, status: "IN_QUEUE"}`; `GET /status/{id}` (POST too, like RunPod's
 * local test server) → `{id, status, delayTime, executionTime, output?, error?}`; `POST /cancel/{id}`;
 * `GET /health`. The key must come in `authorization`. What each job does is scripted: complete
 * after some polls (its output made from the samples bundle it downloaded from the job's
 * `samples_bundle_url`, with the artefact and test samples served here under `/files/`), fail,
 * time out on the service, or hold in progress until a test releases or cancels it.
 */
export type JobScript =
  | { kind: 'complete'; afterPolls?: number; output?: (job: FakeJob) => unknown }
  | { kind: 'fail'; afterPolls?: number; error: string }
  | { kind: 'timed_out'; afterPolls?: number }
  | { kind: 'hold' };

export interface FakeJob {
  id: string;
  input: Record<string, any>;
  status: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';
  polls: number;
  script: JobScript;
  /** What the job found at `samples_bundle_url`: the archive's file names and its voice_info.json. */
  bundle: { files: string[]; info: any; opusHeads: Buffer[] } | null;
  bundleError: string | null;
  output?: unknown;
  error?: string;
  cancelledAt: number | null;
}

/** A one-second 440 Hz tone as a 16 kHz mono WAV (a stand-in for a test sample the GPU job spoke). */
function toneWav(): Buffer {
  const rate = 16000;
  const data = Buffer.alloc(rate * 2);
  for (let i = 0; i < rate; i++) data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), i * 2);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

export class RunPodFake {
  /** The key `authorization` must carry. */
  apiKey = 'test-runpod-key';
  readonly jobs = new Map<string, FakeJob>();
  /** Scripts for the next jobs, in order; then `defaultScript`. */
  readonly queued: JobScript[] = [];
  defaultScript: JobScript = { kind: 'complete', afterPolls: 2 };
  readonly runRequests: Array<Record<string, any>> = [];
  readonly cancelRequests: string[] = [];
  readonly statusRequests: string[] = [];
  /** Answer /status with this HTTP status (an outage) while set. */
  statusOutage: number | null = null;
  /** Answer this many of the next /run requests with 503 (an outage of submissions); each is counted. */
  runOutages = 0;
  runOutageRequests = 0;
  private readonly files = new Map<string, { body: Buffer; type: string }>();
  private server!: http.Server;
  url = '';

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => void this.handle(req, res).catch((err: unknown) => res.writeHead(500).end(String(err))));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The jobs in the order they were submitted. */
  get jobList(): FakeJob[] {
    return [...this.jobs.values()];
  }

  /** Gives a held job a new script (e.g. complete it now). */
  release(id: string, script: JobScript): void {
    const job = this.jobs.get(id);
    if (!job) throw new Error(`no job ${id}`);
    job.script = script;
    job.polls = 0;
  }

  private json(res: http.ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const file = this.files.get(url.pathname);
    if (req.method === 'GET' && url.pathname.startsWith('/files/')) {
      if (!file) return void res.writeHead(404).end('no such file');
      return void res.writeHead(200, { 'content-type': file.type, 'content-length': file.body.length }).end(file.body);
    }
    if (req.headers.authorization !== this.apiKey) return this.json(res, 401, { error: 'Unauthorized' });
    if (req.method === 'GET' && url.pathname === '/health') return this.json(res, 200, { jobs: { inQueue: 0, inProgress: 0 }, workers: { idle: 1, running: 0 } });
    if (req.method === 'POST' && url.pathname === '/run') {
      if (this.runOutages > 0) {
        this.runOutages--;
        this.runOutageRequests++;
        return this.json(res, 503, { error: 'temporarily unavailable' });
      }
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      if (!body || typeof body.input !== 'object') return this.json(res, 400, { error: 'input is required' });
      this.runRequests.push(body);
      const id = `${crypto.randomUUID()}-u1`;
      const job: FakeJob = { id, input: body.input, status: 'IN_QUEUE', polls: 0, script: this.queued.shift() ?? this.defaultScript, bundle: null, bundleError: null, cancelledAt: null };
      this.jobs.set(id, job);
      // Like a real worker, the job fetches its input files.
      void this.fetchBundle(job);
      return this.json(res, 200, { id, status: 'IN_QUEUE' });
    }
    const status = /^\/status\/([^/]+)$/.exec(url.pathname);
    if (status && (req.method === 'GET' || req.method === 'POST')) {
      this.statusRequests.push(status[1]!);
      if (this.statusOutage) return this.json(res, this.statusOutage, { error: 'temporarily unavailable' });
      const job = this.jobs.get(status[1]!);
      if (!job) return this.json(res, 404, { error: 'job not found' });
      this.advance(job);
      return this.json(res, 200, { id: job.id, status: job.status, delayTime: 10, executionTime: job.polls * 100, ...(job.output !== undefined ? { output: job.output } : {}), ...(job.error ? { error: job.error } : {}) });
    }
    const cancel = /^\/cancel\/([^/]+)$/.exec(url.pathname);
    if (cancel && req.method === 'POST') {
      this.cancelRequests.push(cancel[1]!);
      const job = this.jobs.get(cancel[1]!);
      if (!job) return this.json(res, 404, { error: 'job not found' });
      if (job.status === 'IN_QUEUE' || job.status === 'IN_PROGRESS') {
        job.status = 'CANCELLED';
        job.cancelledAt = Date.now();
      }
      return this.json(res, 200, { id: job.id, status: job.status });
    }
    this.json(res, 404, { error: 'not found' });
  }

  private async fetchBundle(job: FakeJob): Promise<void> {
    try {
      const r = await fetch(job.input.samples_bundle_url);
      if (!r.ok) throw new Error(`samples_bundle_url answered ${r.status}`);
      const entries = unzipSync(new Uint8Array(await r.arrayBuffer()));
      const files = Object.keys(entries).sort();
      job.bundle = {
        files,
        info: JSON.parse(Buffer.from(entries['voice_info.json']!).toString('utf8')),
        opusHeads: files.filter((f) => f.endsWith('.opus')).map((f) => Buffer.from(entries[f]!.subarray(0, 64))),
      };
    } catch (err) {
      job.bundleError = (err as Error).message;
    }
  }

  private advance(job: FakeJob) {
    if (job.status !== 'IN_QUEUE' && job.status !== 'IN_PROGRESS') return;
    job.polls++;
    if (job.polls === 1) job.status = 'IN_PROGRESS';
    const s = job.script;
    if (s.kind === 'hold' || job.polls <= (s.afterPolls ?? 1)) return;
    if (s.kind === 'fail') {
      job.status = 'FAILED';
      job.error = s.error;
    } else if (s.kind === 'timed_out') {
      job.status = 'TIMED_OUT';
    } else if (job.bundle || job.bundleError) {
      job.output = s.output ? s.output(job) : this.defaultOutput(job);
      job.status = 'COMPLETED';
    }
  }

  /** The artefact, a score per sample and a test sample per sentence, all served here. */
  defaultOutput(job: FakeJob): unknown {
    if (!job.bundle) return { error: `no samples: ${job.bundleError}` };
    const samples = (job.bundle.info.samples as Array<{ index: number }>).map((s) => s.index);
    this.files.set(`/files/${job.id}/embedding.zip`, {
      body: Buffer.from(zipSync({ 'speaker.json': strToU8(JSON.stringify({ job: job.id, tts_type: job.input.tts_type, samples })) })),
      type: 'application/zip',
    });
    const tone = toneWav();
    const sentences = job.input.test_sentences as Array<{ sentence_index: number }>;
    for (const s of sentences) this.files.set(`/files/${job.id}/test-${s.sentence_index}.wav`, { body: tone, type: 'audio/wav' });
    return {
      embedding_url: `${this.url}/files/${job.id}/embedding.zip`,
      sample_scores: samples.map((index) => ({ sample_index: index, score: Math.round((0.5 + index / 100) * 1000) / 1000 })),
      test_samples: sentences.map((s) => ({ sample_index: samples[0] ?? null, sentence_index: s.sentence_index, url: `${this.url}/files/${job.id}/test-${s.sentence_index}.wav` })),
      voice_id: `remote-${job.input.voice.id}`,
    };
  }
}
