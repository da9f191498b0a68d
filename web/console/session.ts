/**
 * The console's session: the staff ID token and nothing else, kept in this tab's sessionStorage
 * (gone when the tab closes; never a cookie, never localStorage), read back into memory on load.
 */
const KEY = 'svc-console.idToken';

export interface Claims {
  sub: string;
  email?: string;
  exp?: number;
  amr?: string[];
  permissions?: string[];
}

/** The token's claims for display only (the service verifies the token; the console never trusts these). */
export function claimsOf(token: string): Claims | null {
  try {
    const part = token.split('.')[1];
    const json = atob(
      part
        .replace(/-/g, '+')
        .replace(/_/g, '/')
        .padEnd(Math.ceil(part.length / 4) * 4, '='),
    );
    return JSON.parse(decodeURIComponent(escape(json))) as Claims;
  } catch {
    return null;
  }
}

export function loadToken(): string | null {
  const t = sessionStorage.getItem(KEY);
  if (!t) return null;
  const c = claimsOf(t);
  if (!c || (c.exp !== undefined && c.exp * 1000 < Date.now())) {
    sessionStorage.removeItem(KEY);
    return null;
  }
  return t;
}

export function saveToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
}
