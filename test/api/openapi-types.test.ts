import assert from 'node:assert/strict';
import { useRunningSystem } from '../support/system.js';
import { closedObjects } from '../support/answer-check.js';
import { generatedClientReport } from '../support/openapi-client-types.js';

/**
 * The served OpenAPI document types every answer (issue #50): a client generated from it with
 * openapi-typescript gets a type, not `unknown`, for each success answer with a JSON body, and
 * every success answer declares its body. (That the answers match it is checked on every answer
 * of every test: test/support/answer-check.ts.)
 */

describe('OpenAPI document: typed answers', () => {
  const system = useRunningSystem({ worker: false });

  it('a client generated with openapi-typescript has a type for every success answer', async function () {
    this.timeout(120_000);
    const document = (await system.http('GET', '/openapi.json')).body;
    const report = await generatedClientReport(document);
    assert.deepEqual(report.diagnostics, [], 'the generated types compile');
    assert.ok(report.jsonBodies > 80, `${report.jsonBodies} JSON success bodies`);
    assert.deepEqual(report.unknownBodies, [], 'JSON success bodies typed unknown');
    assert.deepEqual(report.withoutBody, [], 'success answers without a declared body');
  });

  it('declares the media types of answers that are not JSON', async () => {
    const { paths } = (await system.http('GET', '/openapi.json')).body;
    const media = (p: string, method: string, status = '200') => Object.keys(paths[p][method].responses[status].content ?? {});
    assert.deepEqual(media('/v2/transcript/{id}/srt', 'get'), ['application/x-subrip']);
    assert.deepEqual(media('/v2/transcript/{id}/vtt', 'get'), ['text/vtt']);
    assert.deepEqual(paths['/v2/transcript/{id}/vtt'].get.responses['200'].content['text/vtt'].schema.type, 'string');
    assert.deepEqual(media('/api/documents/{partner}/{kb}/rewritten-bundle', 'get'), ['application/zip']);
    assert.deepEqual(media('/v2/audio/speech', 'post'), ['audio/mpeg', 'audio/ogg', 'audio/wav', 'application/octet-stream']);
  });

  it('the response check refuses a member the document does not declare, unless the object is declared open', () => {
    const closed = closedObjects({ type: 'object', properties: { a: { type: 'object', properties: { b: {} } } }, required: ['a'] }) as Record<string, any>;
    assert.equal(closed.unevaluatedProperties, false);
    assert.equal(closed.properties.a.unevaluatedProperties, false);
    const open = closedObjects({ type: 'object', properties: { a: {} }, additionalProperties: true }) as Record<string, any>;
    assert.equal(open.unevaluatedProperties, undefined);
  });
});
