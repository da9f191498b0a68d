/** Small building blocks of the console's screens. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Problem } from './api';

/** A refusal, said in words: role="alert" so a screen reader speaks it at once. */
export function ProblemBox({ problem }: { problem: Problem | null }) {
  if (!problem) return null;
  return (
    <div class="problem" role="alert">
      <p>
        {problem.message}
        {problem.code ? <span class="code"> ({problem.code})</span> : null}
      </p>
      {problem.said ? <p class="hint">The service said: {problem.said}</p> : null}
      {problem.details.length > 0 ? (
        <ul>
          {problem.details.map((d) => (
            <li key={d.path + d.message}>
              <code>{d.path}</code>: {d.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** The message of a field's validation error, if the service named that field (or, unless `exact`, a member of it). */
export function fieldError(problem: Problem | null, field: string, exact = false): string | null {
  if (!problem) return null;
  const d = problem.details.find((x) => x.path === field || (!exact && (x.path.startsWith(`${field}.`) || x.path.startsWith(`${field}[`))));
  return d ? d.message : null;
}

/** An input's attributes for its error message (`id`): marked invalid and described by the message. */
export const invalid = (id: string, message: string | null) => (message ? { 'aria-invalid': true as const, 'aria-describedby': id } : {});

/** The error message shown under an input (see `invalid`). */
export function FieldError({ id, message }: { id: string; message: string | null }) {
  return message ? (
    <p id={id} class="field-error">
      {message}
    </p>
  ) : null;
}

/** "Newer" and "Older" over a list paged by the service's opaque cursors (`cursors`: the cursor of each page shown so far, null for the first). */
export function Pager({ page, load }: { page: { cursors: (string | null)[]; nextCursor: string | null } | null; load: (cursors: (string | null)[]) => void }) {
  if (!page || (page.cursors.length <= 1 && !page.nextCursor)) return null;
  return (
    <div class="pager">
      {page.cursors.length > 1 ? (
        <button type="button" onClick={() => load(page.cursors.slice(0, -1))}>
          Newer
        </button>
      ) : null}
      {page.nextCursor ? (
        <button type="button" onClick={() => load([...page.cursors, page.nextCursor])}>
          Older
        </button>
      ) : null}
    </div>
  );
}

async function copyText(text: string, fallback: HTMLInputElement | HTMLTextAreaElement | null): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (!fallback) return false;
    fallback.select();
    return document.execCommand('copy');
  }
}

/** A secret the service shows only once: the value, a copy button, and a button to put it away. */
export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone: () => void }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<'' | 'yes' | 'no'>('');
  useEffect(() => input.current?.focus(), []);
  return (
    <div class="secret" role="group" aria-label={label}>
      <p class="secret-note">
        <strong>{label}</strong>: shown only this once. Copy it now and keep it somewhere safe; the service stores only a hash or keeps it sealed, and cannot
        show it again.
      </p>
      <div class="secret-row">
        <input
          ref={input}
          readOnly
          value={value}
          aria-label={`${label} (shown once)`}
          class="mono"
          data-secret
          onFocus={(e) => (e.currentTarget as HTMLInputElement).select()}
        />
        <button type="button" onClick={() => void copyText(value, input.current).then((ok) => setCopied(ok ? 'yes' : 'no'))}>
          Copy
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          I saved it
        </button>
      </div>
      <p role="status" class="hint">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'no' ? 'Copying was refused by the browser: select the text and copy it.' : ''}
      </p>
    </div>
  );
}

/** A screen's heading, focused when the screen opens (keyboard and screen-reader users land on it). */
export function ScreenTitle({ children }: { children: ComponentChildren }) {
  const h = useRef<HTMLHeadingElement>(null);
  useEffect(() => h.current?.focus(), []);
  return (
    <h2 ref={h} tabIndex={-1}>
      {children}
    </h2>
  );
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' }) : '—');

export function EnvBadge({ kind }: { kind: string }) {
  return <span class={`env env-${kind}`}>{kind === 'production' ? 'Production' : 'Sandbox'}</span>;
}
