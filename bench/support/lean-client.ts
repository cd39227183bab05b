import crypto from 'node:crypto';
import http from 'node:http';

/**
 * The clients of a throughput benchmark, built to cost the shared machine little: each request's
 * multipart/form-data body is one Buffer assembled from strings, sent over a keep-alive agent with
 * node:http. fetch with FormData (undici and web streams) spent about as much CPU per request as
 * the API's own handling of a small upload, on the same two cores as the service it measured.
 */
export interface LeanResponse {
  status: number;
  body: Buffer;
}

export type FormPart = { name: string; value: string } | { name: string; filename: string; content: string | Buffer };

/** A multipart/form-data body of these parts, and its content type. */
export function multipartBody(parts: FormPart[]): { body: Buffer; contentType: string } {
  const boundary = `----bench${crypto.randomBytes(12).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = 'filename' in part ? `form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: application/octet-stream` : `form-data; name="${part.name}"`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n\r\n`));
    const content = 'value' in part ? part.value : part.content;
    chunks.push(typeof content === 'string' ? Buffer.from(content) : content);
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** POSTs over keep-alive connections, at most `connections` at once (one per client of the benchmark). */
export function leanPoster(connections: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  return {
    post(url: string, headers: Record<string, string>, body: Buffer, contentType: string): Promise<LeanResponse> {
      return new Promise((resolve, reject) => {
        const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-type': contentType, 'content-length': String(body.length) } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}
