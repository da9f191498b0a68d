/** Stylesheets: the check-in page and the demo get a hashed .css file; the widget imports its sheet as text (scripts/build-web.js). */
declare module '*.css' {
  const text: string;
  export default text;
}
/** The README's webhook receiver (scripts/webhook-receiver.js), put in by scripts/build-web.js for the console's snippet. */
declare const __WEBHOOK_RECEIVER__: string;
