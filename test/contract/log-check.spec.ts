// eslint-disable-next-line @typescript-eslint/no-require-imports
const { scanLog } = require('../../scripts/log-check');

/** The whole-run log check (scripts/test.js) finds what it is meant to find. */
describe('log check', () => {
  it('passes clean metadata lines', () => {
    const line = JSON.stringify({ level: 30, reqId: 'r1', method: 'POST', route: '/api/v1/clinical-cases/:caseId/updates', statusCode: 200, msg: 'request' });
    expect(scanLog(`${line}\n${line}\n`)).toEqual({ lines: 2, findings: [] });
  });

  it.each([
    [{ msg: 'x', to: 'patient@example.test' }, 'an e-mail address'],
    [{ msg: 'note: CANARY-NOTE-1' }, 'a planted canary value'],
    [{ msg: 'key svc_sb_abcdefghijkl' }, 'an API key'],
    [{ msg: 'whsec_abcdefghijkl' }, 'a signing or identity secret'],
    [{ authorization: 'Bearer abc' }, 'a bearer token'],
    [{ url: '/check-ins/1?token=abc' }, 'a check-in token in a URL'],
  ])('finds %j', (entry, what) => {
    expect(scanLog(JSON.stringify(entry)).findings).toEqual([{ line: 1, what }]);
  });

  it('refuses a line that is not structured JSON', () => {
    expect(scanLog('plain text\n').findings).toEqual([{ line: 1, what: 'not a JSON log line' }]);
  });
});
