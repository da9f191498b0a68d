/**
 * What must never appear in a service log line (the "no PHI in logs" rule): e-mail addresses (patients'
 * and staff's), the canary values tests plant in patient data, API keys, signing and identity
 * secrets, bearer tokens and JWTs, and anything that is not a structured JSON line.
 */
const FORBIDDEN = [
  { what: 'an e-mail address', re: /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/ },
  { what: 'a planted canary value', re: /canary/i },
  { what: 'an API key', re: /svc_(sb|prod)_[A-Za-z0-9_-]{8,}/ },
  { what: 'a signing or identity secret', re: /(whsec|idsec)_[A-Za-z0-9_-]{8,}/ },
  { what: 'a bearer token', re: /bearer\s+\S+/i },
  { what: 'a JWT', re: /eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\./ },
  { what: 'a check-in token in a URL', re: /[?&]token=/ },
];

function scanLog(text) {
  const findings = [];
  const all = text.split('\n').filter((l) => l.length > 0);
  all.forEach((line, i) => {
    try {
      JSON.parse(line);
    } catch {
      findings.push({ line: i + 1, what: 'not a JSON log line' });
      return;
    }
    for (const f of FORBIDDEN) if (f.re.test(line)) findings.push({ line: i + 1, what: f.what });
  });
  return { lines: all.length, findings };
}

module.exports = { scanLog, FORBIDDEN };
