import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { extractFile, UnreadableDocument, type ExtractOptions } from '../../lib/digitization/extractors/index.js';
import { defaultExtractionLimits } from '../../lib/digitization/extractors/types.js';
import { BoundedZip } from '../../lib/digitization/zip-reader.js';
import { configureToolLimits, runTool, ToolFailed } from '../../lib/platform/child-process.js';
import { speechToTextFromSettings } from '../../lib/providers/speech-to-text.js';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { processRunning } from '../support/tool-path.js';
import { docxBomb, entityBombXlsx, epubBomb, hugePagePdf, manyEntriesXlsx, pdfBomb, xlsxBomb } from '../support/bombs.js';

/**
 * Bounded work (docs/abuse-resistance.md, "Bounded work in the worker"): files built to make the
 * worker do unbounded work (gigabytes from a few megabytes, tens of thousands of parts, a render of
 * absurd size, a header claiming years of audio) fail their document with a processing_error that
 * says what happened, and the worker goes on with the next document. The bombs are real: built in
 * the test, they inflate to what they claim.
 */

/** An MP3 of one second whose Info header claims 2^31 - 1 frames: almost five years of audio. */
function longHeaderMp3(dir: string): Buffer {
  const file = path.join(dir, 'second.mp3');
  execFileSync('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'anullsrc=r=8000:cl=mono', '-t', '1', '-c:a', 'libmp3lame', '-b:a', '8k', file]);
  const mp3 = readFileSync(file);
  const at = [mp3.indexOf('Info'), mp3.indexOf('Xing')].find((i) => i >= 0);
  assert.ok(at !== undefined && at >= 0, 'ffmpeg wrote an Info header');
  assert.ok(mp3.readUInt32BE(at + 4) & 1, 'the header has a frame count');
  mp3.writeUInt32BE(0x7fffffff, at + 8);
  return mp3;
}

const GIB = 1024;

describe('decompression bombs and other unbounded work', function () {
  this.timeout(600_000);
  let dir: string;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bombs-'));
  });
  after(async () => {
    configureToolLimits({ maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 2048 * 1024 * 1024 });
    await fs.rm(dir, { recursive: true, force: true });
  });

  describe('in the extractors', () => {
    const options = (limits: Partial<typeof defaultExtractionLimits> = {}): ExtractOptions => ({
      ocrLanguages: ['eng'],
      pdfOcr: { maxPages: 5, concurrency: 1, dpi: 300 },
      libreOfficeTimeoutMs: 60_000,
      speechToText: speechToTextFromSettings({ model: null, baseUrl: null, apiKey: null, timeoutSeconds: 60, local: { modelDir: '', threads: 1, concurrency: 1 } } as never),
      limits: { ...defaultExtractionLimits, zipMaxInflatedBytes: 64 * 1024 * 1024, toolTimeoutMs: 8_000, ...limits },
    });
    const refused = async (name: string, content: Buffer, ext: string, reason: RegExp, opts = options()) => {
      const file = path.join(dir, name);
      await fs.writeFile(file, content);
      await assert.rejects(extractFile(file, ext, opts), (err: Error) => {
        assert.ok(err instanceof UnreadableDocument, `${name}: ${err.name}: ${err.message}`);
        assert.match(err.message, reason, name);
        return true;
      });
    };

    it('an XLSX of 4 MiB declaring 4 GiB of sheet is refused before anything is inflated', async () => {
      const bomb = xlsxBomb({ mib: 4 * GIB - 1, declare: 'truth' });
      assert.ok(bomb.length < 5 * 1024 * 1024);
      await refused('declared.xlsx', bomb, 'xlsx', /the Excel \(\.xlsx\) file expands to more than 64 MiB of content \(EXTRACT_ZIP_MAX_INFLATED_MB, part xl\/worksheets\/sheet1\.xml\); it may be a decompression bomb/);
    });

    it('an XLSX whose header lies (1 KiB declared, 4 GiB inside) is stopped at the budget while it inflates', async () => {
      await refused('lying.xlsx', xlsxBomb({ mib: 4 * GIB - 1, declare: 'lie' }), 'xlsx', /expands to more than 64 MiB of content.*decompression bomb/);
    });

    it('a DOCX inflating to 2 GiB never reaches mammoth', async () => {
      await refused('bomb.docx', docxBomb(2 * GIB), 'docx', /the Word \(\.docx\) file expands to more than 64 MiB of content \(EXTRACT_ZIP_MAX_INFLATED_MB, part word\/document\.xml\)/);
    });

    it('an EPUB whose chapter inflates to 2 GiB is refused', async () => {
      await refused('bomb.epub', epubBomb(2 * GIB), 'epub', /the EPUB file expands to more than 64 MiB of content \(EXTRACT_ZIP_MAX_INFLATED_MB, part OEBPS\/c1\.xhtml\)/);
    });

    it('a package of 20,000 entries is refused from its central directory', async () => {
      await refused('many.xlsx', manyEntriesXlsx(20_000), 'xlsx', /has 20002 entries; at most 10000 are read \(EXTRACT_ZIP_MAX_ENTRIES\)/);
    });

    it('reads no more of a package than its limits allow, whatever the parts claim', async () => {
      const file = path.join(dir, 'budget.xlsx');
      await fs.writeFile(file, xlsxBomb({ mib: 8, declare: 'lie' }));
      const zip = await BoundedZip.open(file, { maxEntries: 10, maxInflatedBytes: 4 * 1024 * 1024 }, 'the file');
      await assert.rejects(zip.read('xl/worksheets/sheet1.xml'), /expands to more than 4 MiB/);
      assert.ok(zip.inflatedBytes <= 4 * 1024 * 1024);
      const roomy = await BoundedZip.open(file, { maxEntries: 10, maxInflatedBytes: 16 * 1024 * 1024 }, 'the file');
      assert.ok((await roomy.read('xl/worksheets/sheet1.xml'))!.length > 8 * 1024 * 1024);
    });

    it('an XML entity bomb in a sheet expands to nothing', async () => {
      const file = path.join(dir, 'entities.xlsx');
      await fs.writeFile(file, entityBombXlsx(9));
      const out = await extractFile(file, 'xlsx', options()).catch((err: Error) => err);
      // Either the entities are left unexpanded or the document is refused: never a billion laughs.
      if (out instanceof Error) assert.ok(out instanceof UnreadableDocument, out.message);
      else assert.ok(out.text.length < 10_000, `${out.text.length} characters`);
    });

    it('a file whose parsing needs more heap than allowed ends its thread, not this process', async () => {
      // Half a million tiny JSON objects: a few megabytes of file, far more than 64 MiB of heap.
      const json = `[${Array.from({ length: 2_000_000 }, (_, i) => `{"k":${i}}`).join(',')}]`;
      await refused('heap.json', Buffer.from(json), 'json', /the JSON file needs more than the 64 MiB of memory reading one document may use \(EXTRACT_MAX_HEAP_MB\)/, options({ maxHeapMb: 64 }));
      // This process is alive and still reads documents.
      const ok = path.join(dir, 'ok.json');
      await fs.writeFile(ok, '{"still": "here"}');
      assert.match((await extractFile(ok, 'json', options())).text, /still/);
      // The threads of the small heap limit too: the one that ran out of memory is not reused.
      assert.match((await extractFile(ok, 'json', options({ maxHeapMb: 64 }))).text, /still/);
    });

    it('a PDF whose 3 MiB hold a 1 GiB content stream is stopped at its tool time limit', async () => {
      const bomb = pdfBomb(GIB);
      assert.ok(bomb.length < 4 * 1024 * 1024);
      await refused('bomb.pdf', bomb, 'pdf', /the PDF (took too long to read \(over 8 s\)|needs more (processing time|memory))/);
    });

    it('a PDF page too large to render for OCR fails on the memory limit of the renderer', async () => {
      configureToolLimits({ maxMemoryBytes: 512 * 1024 * 1024, maxFileBytes: 64 * 1024 * 1024 });
      try {
        await refused('huge-page.pdf', hugePagePdf(60), 'pdf', /page 1 of the PDF is too large to render for OCR at 300 dpi/);
      } finally {
        configureToolLimits({ maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 2048 * 1024 * 1024 });
      }
    });

    it('an MP3 whose header claims five years is refused before it is decoded', async () => {
      await refused('years.mp3', longHeaderMp3(dir), 'mp3', /the recording is \d+ h \d+ min long \(by its header\); at most 4 h 0 min are transcribed \(DOCUMENT_MAX_MEDIA_SECONDS\)/);
    });
  });

  describe('every tool runs under memory, CPU-time and file-size limits', () => {
    it('a tool that wants more memory than allowed fails as memory_limit', async () => {
      configureToolLimits({ maxMemoryBytes: 32 * 1024 * 1024, maxFileBytes: 64 * 1024 * 1024 });
      try {
        // 32 MiB of address space is not even enough for ffmpeg's libraries.
        await assert.rejects(
          runTool('ffmpeg', ['-nostdin', '-hide_banner', '-version'], { timeoutMs: 60_000 }),
          (err: ToolFailed) => err instanceof ToolFailed && err.kind === 'memory_limit' && /needed more than the 32 MiB of memory/.test(err.message),
        );
      } finally {
        configureToolLimits({ maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 2048 * 1024 * 1024 });
      }
    });

    it('a tool that writes a file larger than allowed is stopped as file_too_large', async () => {
      configureToolLimits({ maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 1024 * 1024 });
      try {
        await assert.rejects(
          runTool('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'anullsrc=r=48000:cl=stereo', '-t', '60', path.join(dir, 'big.wav')], { timeoutMs: 60_000 }),
          (err: ToolFailed) => err instanceof ToolFailed && err.kind === 'file_too_large',
        );
      } finally {
        configureToolLimits({ maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 2048 * 1024 * 1024 });
      }
    });

    it('each tool starts with its address space, CPU time (its time bound) and file size limited by the kernel', async () => {
      configureToolLimits({ maxMemoryBytes: 300 * 1024 * 1024, maxFileBytes: 5 * 1024 * 1024 });
      try {
        // prlimit run as the tool itself reports the limits it was started under.
        const { stdout } = await runTool('prlimit', ['--noheadings', '--raw', '-o', 'RESOURCE,SOFT,HARD', '--cpu', '--as', '--fsize'], { timeoutMs: 7_000 });
        const limits = Object.fromEntries(stdout.toString('utf8').trim().split('\n').map((l) => { const [r, soft, hard] = l.trim().split(/\s+/); return [r, `${soft} ${hard}`]; }));
        assert.deepEqual(limits, { CPU: '7 8', AS: `${300 * 1024 * 1024} ${300 * 1024 * 1024}`, FSIZE: `${5 * 1024 * 1024} ${5 * 1024 * 1024}` });
      } finally {
        configureToolLimits({ maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 2048 * 1024 * 1024 });
      }
    });
  });

  describe('end to end: the worker fails each bomb and keeps working', () => {
    let api: RunningApi;
    let worker: RunningWorker;
    let http: ReturnType<typeof client>;
    let kb: Awaited<ReturnType<typeof newKnowledgeBase>>;

    before(async () => {
      api = await startApi();
      http = client(api.url);
      worker = await startWorker({ EXTRACT_ZIP_MAX_INFLATED_MB: '64', EXTRACT_TOOL_TIMEOUT_SECONDS: '8', EXTRACT_MAX_HEAP_MB: '256', TOOL_MAX_MEMORY_MB: '1024' });
      kb = await newKnowledgeBase(http);
    });
    after(async () => {
      await worker?.kill();
      await api?.close();
    });

    const upload = async (name: string, content: Buffer) => {
      const res = await http('POST', `/api/documents/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key, form: { type: 'file', folder: kb.folder, file: { name, content } } });
      assert.equal(res.status, 201, `${name}: ${JSON.stringify(res.body)}`);
      return res.body.id as string;
    };
    const outcome = (id: string) =>
      eventually(`document ${id} to be digitized or to fail`, async () => {
        const doc = (await http('GET', `/api/document/${kb.partner.name}/${kb.kb}/${id}`, { key: kb.partner.key })).body;
        if (doc.processing_error) return { error: doc.processing_error as string };
        return doc.file_digitized ? { error: null } : null;
      }, 300_000);

    it('fails XLSX, DOCX, EPUB and PDF bombs and a five-year MP3 with a clear processing_error, then digitizes the next document', async () => {
      const pid = worker.child.pid!;
      const bombs: Array<[string, Buffer, RegExp]> = [
        ['sheet.xlsx', xlsxBomb({ mib: 4 * GIB - 1, declare: 'lie' }), /^sheet\.xlsx: the Excel \(\.xlsx\) file expands to more than 64 MiB of content/],
        ['letter.docx', docxBomb(2 * GIB), /^letter\.docx: the Word \(\.docx\) file expands to more than 64 MiB/],
        ['novel.epub', epubBomb(2 * GIB), /^novel\.epub: the EPUB file expands to more than 64 MiB/],
        ['report.pdf', pdfBomb(GIB), /^report\.pdf: the PDF (took too long to read \(over 8 s\)|needs more)/],
        ['talk.mp3', longHeaderMp3(dir), /^talk\.mp3: the recording is \d+ h \d+ min long \(by its header\)/],
      ];
      const ids = [];
      for (const [name, content] of bombs) ids.push(await upload(name, content));
      for (const [i, [name, , reason]] of bombs.entries()) {
        const result = await outcome(ids[i]!);
        assert.match(result.error ?? '(digitized)', reason, name);
      }
      assert.ok(processRunning(pid), 'the same worker process is still running');
      const next = await upload('after.txt', Buffer.from('The worker is still here and reads this sentence.'));
      assert.deepEqual(await outcome(next), { error: null });
      assert.ok(processRunning(pid), 'and it was that worker');
    });
  });
});
