import { WIDGET_SESSION_TTL_S, WidgetSessionContext, identityTokenVersion, widgetSessionEnded, widgetSessionExpiry } from '../src';

const env = 'e0000000-0000-4000-8000-000000000001';
const other = 'e0000000-0000-4000-8000-000000000002';
const base: WidgetSessionContext = { sessionId: 's', organizationId: 'o', environmentId: env, patientId: null, externalPatientId: null, email: null };

describe('widget session lifetime', () => {
  it('anonymous: an hour from opening', () => {
    expect(widgetSessionExpiry(1000, null)).toBe(1000 + WIDGET_SESSION_TTL_S);
  });

  it('with an identity token: an hour from opening, never past the token exp + 60 minutes', () => {
    expect(widgetSessionExpiry(1000, 1600)).toBe(4600); // exp ahead: the hour from opening comes first
    expect(widgetSessionExpiry(1000, 1000)).toBe(4600);
    expect(widgetSessionExpiry(1000, 970)).toBe(970 + 3600); // exp 30 s ago (clock tolerance): bound by exp
  });
});

describe('widget session ended by an identity_token rotation', () => {
  it('counts rotations per environment; none recorded is 0', () => {
    expect(identityTokenVersion({}, env)).toBe(0);
    expect(identityTokenVersion({ identityTokenVersions: { [other]: 3 } }, env)).toBe(0);
    expect(identityTokenVersion({ identityTokenVersions: { [env]: 2 } }, env)).toBe(2);
    expect(identityTokenVersion({ identityTokenVersions: {} }, 'constructor')).toBe(0);
  });

  it('ends identified sessions opened under another count; anonymous sessions never', () => {
    const identified = { ...base, externalPatientId: 'x', identityTokenVersion: 1 };
    expect(widgetSessionEnded(identified, { identityTokenVersions: { [env]: 1 } })).toBe(false);
    expect(widgetSessionEnded(identified, { identityTokenVersions: { [env]: 2 } })).toBe(true);
    expect(widgetSessionEnded(identified, { identityTokenVersions: { [env]: 1, [other]: 9 } })).toBe(false);
    expect(widgetSessionEnded(base, { identityTokenVersions: { [env]: 5 } })).toBe(false);
    // An identified session without a recorded count was opened under count 0.
    const unversioned = { ...base, externalPatientId: 'x' };
    expect(widgetSessionEnded(unversioned, {})).toBe(false);
    expect(widgetSessionEnded(unversioned, { identityTokenVersions: { [env]: 1 } })).toBe(true);
    // An identified session whose patient link was dropped still carries its count.
    expect(widgetSessionEnded({ ...base, identityTokenVersion: 0 }, { identityTokenVersions: { [env]: 1 } })).toBe(true);
  });
});
