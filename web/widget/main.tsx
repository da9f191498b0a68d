/**
 * `{origin}/widget.js`: the patient widget a caller's site includes (docs/decisions.md, "Pages for people").
 *
 *   <script src="https://svc.example/widget.js" data-environment-id="…" async></script>
 * or
 *   <script src="https://svc.example/widget.js"></script>
 *   <script>PatientCareWidget.init({ environmentId: '…', identityToken: async () => fetchTokenFromMyBackend() })</script>
 *
 * It renders in a shadow root of its own element, so the host page's styles cannot reach it (its
 * stylesheet is adopted by the shadow root, which a host page's Content-Security-Policy does not
 * block), and it talks only to the service it was loaded from.
 */
import { render } from 'preact';
import { browserLang, type Lang } from '../shared/lang';
import { WidgetClient, type IdentitySource } from './client';
import { Widget } from './app';
import css from './widget.css';

export interface WidgetOptions {
  environmentId: string;
  /** The signed-in patient's identity token (docs/decisions.md, "Widget sessions and identity tokens"), or a function that fetches a fresh one. */
  identityToken?: IdentitySource;
  /** `en` or `es`; by default the browser's language. */
  language?: Lang;
  /** Open the panel at once. */
  open?: boolean;
}

const script = document.currentScript as HTMLScriptElement | null;
/** The service this script came from: its API is `{origin}/api`. */
const origin = (() => {
  try {
    return new URL(script?.src ?? '', location.href).origin;
  } catch {
    return location.origin;
  }
})();

let mounted: { host: HTMLElement } | null = null;

function styles(root: ShadowRoot): void {
  const adoptable = 'adoptedStyleSheets' in Document.prototype && 'replaceSync' in CSSStyleSheet.prototype;
  if (adoptable) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    root.adoptedStyleSheets = [sheet];
  } else {
    const style = document.createElement('style');
    style.textContent = css;
    root.appendChild(style);
  }
}

export function init(options: WidgetOptions): void {
  if (!options || typeof options.environmentId !== 'string' || !options.environmentId) throw new Error('PatientCareWidget.init: environmentId is required');
  destroy();
  const host = document.createElement('div');
  host.setAttribute('data-patient-care-widget', '');
  const root = host.attachShadow({ mode: 'open' });
  styles(root);
  document.body.appendChild(host);
  const client = new WidgetClient(`${origin}/api`, options.environmentId, options.identityToken ?? null);
  // A signed-in patient's session is opened at once: an identity token lives minutes only.
  if (options.identityToken) void client.ensureSession();
  const lang: Lang = options.language === 'es' || options.language === 'en' ? options.language : browserLang();
  render(<Widget client={client} initialLang={lang} startOpen={!!options.open} />, root);
  mounted = { host };
}

export function destroy(): void {
  if (!mounted) return;
  const root = mounted.host.shadowRoot;
  if (root) render(null, root);
  mounted.host.remove();
  mounted = null;
}

const api = { init, destroy, version: 1 };
(window as unknown as { PatientCareWidget: typeof api }).PatientCareWidget = api;

// Data attributes: <script src=".../widget.js" data-environment-id="…" data-language="es" data-open>
const environmentId = script?.dataset.environmentId;
if (environmentId) {
  const start = () =>
    init({
      environmentId,
      ...(script!.dataset.identityToken ? { identityToken: script!.dataset.identityToken } : {}),
      ...(script!.dataset.language === 'es' || script!.dataset.language === 'en' ? { language: script!.dataset.language } : {}),
      open: script!.hasAttribute('data-open'),
    });
  if (document.body) start();
  else document.addEventListener('DOMContentLoaded', start, { once: true });
}
