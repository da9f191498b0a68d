/** Stylesheets: the check-in page and the demo get a hashed .css file; the widget imports its sheet as text (scripts/build-web.js). */
declare module '*.css' {
  const text: string;
  export default text;
}
