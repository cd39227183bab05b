import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import ts from 'typescript';

/**
 * What a client generated from the OpenAPI document sees: openapi-typescript turns the document
 * into TypeScript types, and the compiler says, for every success answer with a JSON body, whether
 * its type is `unknown` (a schema that says nothing), and for every success answer whether it
 * declares a body at all.
 */
export interface GeneratedClientReport {
  /** `METHOD /path STATUS media-type` of JSON bodies typed `unknown`. */
  unknownBodies: string[];
  /** `METHOD /path STATUS` of success answers that declare no body. */
  withoutBody: string[];
  /** JSON bodies looked at. */
  jsonBodies: number;
  /** Errors of the compiler in the generated types (none expected). */
  diagnostics: string[];
}

const methods = ['get', 'put', 'post', 'delete', 'patch'] as const;

export async function generatedClientReport(document: object): Promise<GeneratedClientReport> {
  const source = astToString(await openapiTS(document as OpenAPI3));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'openapi-client-'));
  try {
    const probes: string[] = [];
    const names: string[] = [];
    const withoutBody: string[] = [];
    const paths = (document as { paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, unknown> }> }>> }).paths;
    for (const [p, item] of Object.entries(paths)) {
      for (const method of methods) {
        for (const [status, response] of Object.entries(item[method]?.responses ?? {})) {
          if (!/^2\d\d$/.test(status)) continue;
          const where = `${method.toUpperCase()} ${p} ${status}`;
          if (!response.content) withoutBody.push(where);
          for (const mediaType of Object.keys(response.content ?? {})) {
            if (!/json/.test(mediaType)) continue;
            names.push(`${where} ${mediaType}`);
            probes.push(`export type T${probes.length} = IsUnknown<paths[${JSON.stringify(p)}][${JSON.stringify(method)}]['responses'][${status}]['content'][${JSON.stringify(mediaType)}]>;`);
          }
        }
      }
    }
    fs.writeFileSync(path.join(dir, 'schema.ts'), source);
    fs.writeFileSync(path.join(dir, 'probe.ts'), [`import type { paths } from './schema.js';`, 'type IsUnknown<T> = unknown extends T ? true : false;', ...probes].join('\n'));
    const program = ts.createProgram([path.join(dir, 'probe.ts')], { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    const checker = program.getTypeChecker();
    const probe = program.getSourceFile(path.join(dir, 'probe.ts'))!;
    const unknownBodies: string[] = [];
    for (const statement of probe.statements) {
      if (!ts.isTypeAliasDeclaration(statement) || !/^T\d+$/.test(statement.name.text)) continue;
      const type = checker.getTypeAtLocation(statement.name);
      if (checker.typeToString(type) !== 'false') unknownBodies.push(names[Number(statement.name.text.slice(1))]!);
    }
    return { unknownBodies, withoutBody, jsonBodies: names.length, diagnostics };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
