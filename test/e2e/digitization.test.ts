import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { legacyOfficeFile, pdf, pdfOf, scannedPage } from '../support/samples.js';
import { docx, epub, pptx, xlsx } from '../support/office-samples.js';
import { supportedExtensions } from '../../lib/digitization/formats.js';
import { processRunning, toolPath } from '../support/tool-path.js';

const run = promisify(execFile);
const ffmpeg = (...args: string[]) => run('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', ...args]);

type Http = ReturnType<typeof client>;
type Kb = Awaited<ReturnType<typeof newKnowledgeBase>>;

async function uploadTo(http: Http, kb: Kb, name: string, content: Buffer | string, form: Record<string, string> = {}): Promise<string> {
  const res = await http('POST', `/api/documents/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key, form: { type: 'file', folder: kb.folder, ...form, file: { name, content } } });
  assert.equal(res.status, 201, `${name}: ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

/** The document once digitization ended: its digitized text, or its processing_error. */
const outcomeOf = (http: Http, kb: Kb, id: string) =>
  eventually(`document ${id} to be digitized or to fail`, async () => {
    const doc = (await http('GET', `/api/document/${kb.partner.name}/${kb.kb}/${id}`, { key: kb.partner.key })).body;
    if (doc.processing_error) return { error: doc.processing_error as string, text: null };
    if (!doc.file_digitized) return null;
    const content = await http('GET', `/api/documents/${kb.partner.name}/${kb.kb}/${id}/content/digitized`, { key: kb.partner.key });
    return { error: null, text: content.body.content as string };
  }, 300_000);

/**
 * Digitization through the whole pipeline: for every extension users may upload, a real file of
 * that type made here goes in through the API and its words come out as the digitized content;
 * every way a file can turn out unreadable ends as a processing_error that names the file and says
 * why. The worker reads at most 2 scanned PDF pages here (PDF_OCR_MAX_PAGES).
 */
describe('digitization of every supported format, end to end', function () {
  this.timeout(600_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let dir: string;
  let kb: Awaited<ReturnType<typeof newKnowledgeBase>>;

  before(async () => {
    api = await startApi();
    http = client(api.url);
    worker = await startWorker({ PDF_OCR_MAX_PAGES: '2' });
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'digitization-e2e-'));
    kb = await newKnowledgeBase(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  const upload = (name: string, content: Buffer | string, form: Record<string, string> = {}) => uploadTo(http, kb, name, content, form);
  const outcome = (id: string) => outcomeOf(http, kb, id);

  /** A file of every supported extension, each holding words the test looks for in its digitized text. */
  async function sampleFiles(): Promise<Record<string, { content: Buffer | string; words: RegExp }>> {
    const words = /lighthouse keeper/i;
    const typed = 'The lighthouse keeper wrote in the logbook every evening.';
    const scan = await scannedPage(['The lighthouse keeper wrote in the logbook', 'every evening before the storm.']);
    const jpeg = path.join(dir, 'page.jpg');
    await fs.writeFile(jpeg, scan.jpeg);
    const image = async (ext: string) => {
      const file = path.join(dir, `page.${ext}`);
      await ffmpeg('-i', jpeg, '-frames:v', '1', file);
      return fs.readFile(file);
    };
    const speech = path.join(dir, 'speech.wav');
    await run('flite', ['-voice', 'slt', '-t', 'Please call the doctor tomorrow morning about the weather report', '-o', speech]);
    const spoken = /doctor|tomorrow|morning|weather|report/i;
    const media = async (ext: string) => {
      const file = path.join(dir, `speech.${ext}`);
      if (ext === 'mp3' || ext === 'm4a') await ffmpeg('-i', speech, ...(ext === 'm4a' ? ['-c:a', 'aac'] : []), file);
      else if (ext === 'avi') await ffmpeg('-f', 'lavfi', '-i', 'color=c=green:s=160x120:r=10', '-i', speech, '-shortest', '-c:v', 'mpeg4', '-c:a', 'libmp3lame', file);
      else await ffmpeg('-f', 'lavfi', '-i', 'color=c=blue:s=160x120:r=10', '-i', speech, '-shortest', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', ...(ext === 'm4v' ? ['-f', 'mp4'] : []), file);
      return fs.readFile(file);
    };
    const html = `<!doctype html><html><head><title>Log</title></head><body><article><h1>Log</h1><p>${typed}</p><p>The lamp was lit at dusk and trimmed at midnight.</p></article></body></html>`;
    return {
      pdf: { content: pdf([typed]), words },
      doc: { content: await fs.readFile(await legacyOfficeFile('doc', `${typed}\n`, dir)), words },
      xls: { content: await fs.readFile(await legacyOfficeFile('xls', `Role,Duty\nLighthouse keeper,logbook\n`, dir)), words },
      ppt: { content: await fs.readFile(await legacyOfficeFile('ppt', [typed], dir)), words },
      docx: { content: await docx([typed]), words },
      pptx: { content: await pptx([[typed]]), words },
      xlsx: { content: await xlsx([{ name: 'Crew', rows: '<row r="1"><c r="A1" t="s"><v>0</v></c></row>' }], ['<t>Lighthouse keeper</t>']), words },
      epub: { content: await epub([{ id: 'c1', html: `<p>${typed}</p><p>The lamp was lit at dusk and trimmed at midnight every single night.</p>` }], ['c1']), words },
      html: { content: html, words },
      htm: { content: html, words },
      txt: { content: typed, words },
      md: { content: `# Log\n\n${typed}\n`, words },
      markdown: { content: `# Log\n\n${typed}\n`, words },
      py: { content: `# ${typed}\nprint("lighthouse keeper")\n`, words },
      js: { content: `// ${typed}\nconsole.log('lighthouse keeper');\n`, words },
      css: { content: `/* ${typed} */\nbody { color: black; }\n`, words },
      csv: { content: 'role,duty\nlighthouse keeper,logbook\n', words },
      json: { content: JSON.stringify({ role: 'lighthouse keeper', duty: 'logbook' }), words },
      xml: { content: '<crew><role>lighthouse keeper</role></crew>', words },
      yaml: { content: 'role: lighthouse keeper\nduty: logbook\n', words },
      yml: { content: 'role: lighthouse keeper\nduty: logbook\n', words },
      jpg: { content: scan.jpeg, words },
      jpeg: { content: scan.jpeg, words },
      png: { content: await image('png'), words },
      tif: { content: await image('tif'), words },
      tiff: { content: await image('tiff'), words },
      gif: { content: await image('gif'), words },
      webp: { content: await image('webp'), words },
      mp3: { content: await media('mp3'), words: spoken },
      wav: { content: await fs.readFile(speech), words: spoken },
      m4a: { content: await media('m4a'), words: spoken },
      mp4: { content: await media('mp4'), words: spoken },
      mov: { content: await media('mov'), words: spoken },
      m4v: { content: await media('m4v'), words: spoken },
      avi: { content: await media('avi'), words: spoken },
    };
  }

  it('reads a real file of every supported extension into digitized text', async () => {
    const samples = await sampleFiles();
    assert.deepEqual(Object.keys(samples).sort(), [...supportedExtensions].sort(), 'one sample per supported extension');
    const ids = Object.fromEntries(await Promise.all(Object.entries(samples).map(async ([ext, s]) => [ext, await upload(`sample.${ext}`, s.content)] as const)));
    for (const [ext, s] of Object.entries(samples)) {
      const result = await outcome(ids[ext]!);
      assert.equal(result.error, null, `.${ext}: ${result.error}`);
      assert.match(result.text!, s.words, `.${ext}: ${JSON.stringify(result.text)}`);
    }
  });

  it('a scanned PDF uploaded with ocr_languages is read in that language, and which page was OCR\'d is recorded', async () => {
    const german = await scannedPage(['Die Kündigungsfrist beträgt drei Monate.', 'Größere Schäden müssen gemeldet werden.']);
    const id = await upload('vertrag.pdf', pdfOf([{ lines: ['Vertrag, Seite eins'] }, german]), { ocr_languages: 'deu' });
    const doc = (await http('GET', `/api/document/${kb.partner.name}/${kb.kb}/${id}`, { key: kb.partner.key })).body;
    assert.deepEqual(doc.ocr_languages, ['deu']);
    const { text, error } = await outcome(id);
    assert.equal(error, null);
    assert.match(text!, /^Vertrag, Seite eins$/m);
    assert.match(text!, /^<!-- page 2: OCR \(tesseract, deu\+eng\) -->$/m);
    assert.match(text!, /Kündigungsfrist beträgt drei Monate/);
  });

  it('a knowledge base\'s ocr_languages apply to its documents that choose none', async () => {
    const name = `${kb.kb}-fr`;
    const created = await http('POST', `/api/knowledgebases/${kb.partner.name}`, { key: kb.partner.key, form: { name, ocr_languages: 'fra' } });
    assert.equal(created.status, 201);
    assert.deepEqual(created.body.ocr_languages, ['fra']);
    await http('POST', `/api/folders/${kb.partner.name}/${name}`, { key: kb.partner.key, form: { name: 'scans' } });
    const french = await scannedPage(['Le gardien du phare écrivait chaque soir', 'avant que la tempête ne commence.']);
    const res = await http('POST', `/api/documents/${kb.partner.name}/${name}`, { key: kb.partner.key, form: { type: 'file', folder: 'scans', file: { name: 'phare.pdf', content: pdfOf([french]) } } });
    assert.equal(res.status, 201);
    const text = await eventually('the French scan to be digitized', async () => {
      const content = await http('GET', `/api/documents/${kb.partner.name}/${name}/${res.body.id}/content/digitized`, { key: kb.partner.key });
      return content.status === 200 ? (content.body.content as string) : null;
    });
    assert.match(text, /page 1: OCR \(tesseract, fra\+eng\)/);
    assert.match(text, /tempête/);
  });

  it('an unknown OCR language is refused at upload with a 400 naming the field, and nothing is created', async () => {
    const before = (await http('GET', `/api/documents/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key })).body.documents.length;
    const res = await http('POST', `/api/documents/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key, form: { type: 'file', folder: kb.folder, ocr_languages: 'klingon', file: { name: 'a.txt', content: 'x' } } });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /form\.ocr_languages/);
    assert.equal((await http('GET', `/api/documents/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key })).body.documents.length, before);
  });

  it('every way a file turns out unreadable is a processing_error naming the file and the reason', async () => {
    const blankImage = path.join(dir, 'blank.png');
    await ffmpeg('-f', 'lavfi', '-i', 'color=c=white:s=400x200', '-frames:v', '1', blankImage);
    const silence = path.join(dir, 'silence.wav');
    await ffmpeg('-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '3', silence);
    const scan = await scannedPage(['A scanned page of a long book']);
    const cases: Array<[string, Buffer | string, RegExp]> = [
      ['empty.pdf', pdf([]), /^empty\.pdf: the PDF contains no text, and OCR recognised none on its 1 scanned page$/],
      ['book.pdf', pdfOf([scan, scan, scan]), /^book\.pdf: the PDF has 3 pages without a text layer that need OCR; at most 2 are read \(PDF_OCR_MAX_PAGES\)$/],
      ['blank.png', await fs.readFile(blankImage), /^blank\.png: no text was recognised in the image$/],
      ['silence.wav', await fs.readFile(silence), /^silence\.wav: no speech was recognised in the recording$/],
      ['empty.docx', await docx([]), /^empty\.docx: the Word document \(\.docx\) contains no text$/],
      ['broken.json', '{"role": ', /^broken\.json: /],
      ['invisible.txt', '\u200b\u200d\ufeff\u0007 \n\u00ad\u2060\n', /^invisible\.txt: the \.txt file contains no visible text, only invisible or control characters$/],
    ];
    const ids = await Promise.all(cases.map(([name, content]) => upload(name, content)));
    for (const [i, [name, , reason]] of cases.entries()) {
      const { error } = await outcome(ids[i]!);
      assert.match(error ?? '(digitized)', reason, name);
    }
  });
});

/**
 * The paths of Office 97-2003 files when LibreOffice cannot do its part, end to end: workers whose
 * PATH lacks `soffice` (a server without the package), or holds a stand-in for it that fails or
 * hangs (an honest way to make a conversion fail or outlast LIBREOFFICE_TIMEOUT_SECONDS on
 * purpose). The files are real ones, made by LibreOffice in this test process.
 */
describe('digitization of Office 97-2003 files when LibreOffice is missing, fails or is too slow', function () {
  this.timeout(600_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let dir: string;
  let kb: Awaited<ReturnType<typeof newKnowledgeBase>>;
  let files: { doc: Buffer; xls: Buffer; ppt: Buffer };

  before(async () => {
    api = await startApi();
    http = client(api.url);
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'digitization-libreoffice-'));
    kb = await newKnowledgeBase(http);
    files = {
      doc: await fs.readFile(await legacyOfficeFile('doc', 'The lighthouse keeper wrote in the logbook every evening.\n', dir)),
      xls: await fs.readFile(await legacyOfficeFile('xls', 'Role,Duty\nLighthouse keeper,logbook\n', dir)),
      ppt: await fs.readFile(await legacyOfficeFile('ppt', ['The lighthouse keeper wrote in the logbook'], dir)),
    };
  });
  after(async () => {
    await api?.close();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  const upload = (name: string, content: Buffer | string, form: Record<string, string> = {}) => uploadTo(http, kb, name, content, form);
  const outcome = (id: string) => outcomeOf(http, kb, id);

  it('without LibreOffice on the server, a .doc is read by catdoc and a .xls by xls2csv', async () => {
    const worker = await startWorker({ PATH: toolPath(path.join(dir, 'no-soffice'), { without: ['soffice'] }) });
    try {
      const doc = await outcome(await upload('log.doc', files.doc));
      assert.equal(doc.error, null);
      assert.match(doc.text!, /The lighthouse keeper wrote in the logbook every evening\./);
      const xls = await outcome(await upload('crew.xls', files.xls));
      assert.equal(xls.error, null);
      assert.match(xls.text!, /Lighthouse keeper/);
    } finally {
      await worker.kill();
    }
  });

  describe('with a LibreOffice that fails, or hangs past LIBREOFFICE_TIMEOUT_SECONDS (5 s)', () => {
    let worker: RunningWorker;
    let shim: string;
    const mode = (m: 'fail' | 'hang') => fs.writeFile(path.join(shim, 'mode'), m);

    before(async () => {
      shim = path.join(dir, 'soffice-stand-in');
      // Fails as LibreOffice does on a file it cannot load, or hangs with a helper process of its
      // own (as soffice.bin is), recording both process ids.
      const standIn = `#!/bin/sh
case "$(cat '${shim}/mode')" in
  fail) echo 'Warning: failed to launch javaldx - java may not function correctly' >&2; echo 'Error: source file could not be loaded' >&2; exit 1 ;;
  hang) echo $$ >> '${shim}/pids'; /bin/sleep 600 & echo $! >> '${shim}/pids'; wait ;;
esac
`;
      worker = await startWorker({ PATH: toolPath(shim, { standIns: { soffice: standIn } }), LIBREOFFICE_TIMEOUT_SECONDS: '5' });
    });
    after(async () => {
      await worker?.kill();
    });

    it('a failing LibreOffice: the .doc is read by the fallback; the .ppt, which the fallback cannot read, fails saying what LibreOffice said', async () => {
      await mode('fail');
      const doc = await outcome(await upload('failed.doc', files.doc));
      assert.equal(doc.error, null);
      assert.match(doc.text!, /The lighthouse keeper wrote in the logbook every evening\./);
      const ppt = await outcome(await upload('failed.ppt', files.ppt));
      assert.equal(ppt.error, 'failed.ppt: the PowerPoint 97-2003 presentation (.ppt) cannot be read: LibreOffice failed (Error: source file could not be loaded)');
    });

    it('a conversion past the time limit is killed with its helpers: the .doc is read by the fallback; the .ppt fails naming the limit', async () => {
      await mode('hang');
      const started = Date.now();
      const doc = await outcome(await upload('slow.doc', files.doc));
      assert.equal(doc.error, null);
      assert.match(doc.text!, /The lighthouse keeper wrote in the logbook every evening\./);
      assert.ok(Date.now() - started >= 5000, 'the fallback ran once the limit had passed');
      const ppt = await outcome(await upload('slow.ppt', files.ppt));
      assert.equal(ppt.error, 'slow.ppt: the PowerPoint 97-2003 presentation (.ppt) took too long to convert (LibreOffice, over 5 s)');
      const pids = (await fs.readFile(path.join(shim, 'pids'), 'utf8')).trim().split('\n').map(Number);
      assert.equal(pids.length, 4, 'two conversions, each a stand-in and its helper');
      for (const pid of pids) assert.equal(processRunning(pid), false, `process ${pid} of a timed-out conversion was killed`);
    });
  });
});
