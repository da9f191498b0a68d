import { randomUUID } from 'node:crypto';
import { UUID_PATH_PARAMS, uuidParamProblem } from '../src/path-params';

describe('uuidParamProblem', () => {
  it("passes uuids in any case, including ones of no RFC version (a well-formed unknown id is the route's 404)", () => {
    for (const id of [randomUUID(), randomUUID().toUpperCase(), '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff']) {
      expect(uuidParamProblem({ caseId: id, orgId: id })).toBeUndefined();
    }
  });

  it('names each malformed uuid parameter (400 VALIDATION_FAILED)', () => {
    const err = uuidParamProblem({ orgId: 'nope', envId: randomUUID(), caseId: `${randomUUID()}x` });
    expect({ status: err?.status, code: err?.code, details: err?.details }).toEqual({
      status: 400,
      code: 'VALIDATION_FAILED',
      details: [
        { path: 'orgId', message: 'orgId must be a uuid' },
        { path: 'caseId', message: 'caseId must be a uuid' },
      ],
    });
    for (const bad of [
      '',
      ' ',
      randomUUID().replace(/-/g, ''),
      `{${randomUUID()}}`,
      `urn:uuid:${randomUUID()}`,
      `${randomUUID()}\n`,
      'g'.repeat(8) + randomUUID().slice(8),
    ]) {
      if (bad === '') continue;
      expect(uuidParamProblem({ checkInId: bad })?.details).toEqual([{ path: 'checkInId', message: expect.any(String) }]);
    }
  });

  it('leaves other parameters (a member sub) and an empty segment (no route) alone', () => {
    expect(uuidParamProblem({ orgId: randomUUID(), sub: 'auth0|123' })).toBeUndefined();
    expect(uuidParamProblem({ caseId: '' })).toBeUndefined();
    expect(uuidParamProblem(undefined)).toBeUndefined();
    expect(UUID_PATH_PARAMS.has('sub')).toBe(false);
  });
});
