// The thread of lib/dialog-analysis/schema-sandbox.ts: compiles callers' JSON Schemas and validates
// answers against them with ajv, away from the event loop of the API or worker. Plain JavaScript,
// because a worker thread cannot load TypeScript through tsx on Node 20. Kept dumb on purpose:
// raw schemas in, raw ajv errors out; every rule about what they mean is in the TypeScript side.
import { parentPort } from 'node:worker_threads';
import { Ajv } from 'ajv';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const addFormats = addFormatsModule.default ?? addFormatsModule;

// A fresh instance per task: nothing of one caller's schema stays behind for the next.
// strictSchema 'log' (with no logger): unknown keywords pass, as JSON Schema allows; an unknown
// format fails to compile. $data stays off. optimize:false compiles large schemas several times faster.
function newAjv(dialect) {
  const options = { allErrors: true, strict: false, strictSchema: 'log', logger: false, code: { optimize: false } };
  const ajv = dialect === '2020-12' ? new Ajv2020(options) : new Ajv(options);
  addFormats(ajv);
  return ajv;
}

const plainErrors = (errors) =>
  (errors ?? []).map((e) => ({ instancePath: e.instancePath, schemaPath: e.schemaPath, keyword: e.keyword, params: e.params, message: e.message ?? null }));

function compileFailure(err) {
  return { name: err?.constructor?.name ?? 'Error', message: String(err?.message ?? err), missingRef: err?.missingRef ?? null };
}

function run(task) {
  if (task.op === 'check') {
    const ajv = newAjv(task.dialect);
    if (!ajv.validateSchema(task.schema)) return { schemaErrors: plainErrors(ajv.errors) };
    try {
      ajv.compile(task.schema);
    } catch (err) {
      return { compileError: compileFailure(err) };
    }
    return { ok: true };
  }
  // validate: each named value against its schema (an instance each: two schemas may share an $id)
  const errors = {};
  for (const [name, schema] of Object.entries(task.schemas)) {
    const ajv = newAjv(task.dialects[name]);
    let validate;
    try {
      validate = ajv.compile(schema);
    } catch (err) {
      return { compileError: compileFailure(err) };
    }
    errors[name] = validate(task.data[name]) ? [] : plainErrors(validate.errors);
  }
  return { errors };
}

parentPort.on('message', (message) => {
  let result;
  try {
    result = run(message.task);
  } catch (err) {
    result = { compileError: compileFailure(err) };
  }
  parentPort.postMessage({ id: message.id, result });
});
parentPort.postMessage({ ready: true });
