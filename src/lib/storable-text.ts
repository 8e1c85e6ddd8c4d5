/**
 * Text that came from outside a request (model output, tool results, error messages of remote servers) made
 * storable on both databases: PostgreSQL text cannot hold U+0000, so it becomes U+FFFD, and lone surrogates
 * (which UTF-8 cannot encode) become U+FFFD as well. Requests are refused for such text instead (400); what a
 * model or a tool produced cannot be refused, so it is repaired, the same way on SQLite and Postgres.
 */
export function storableText(text: string): string {
  const wellFormed = text.isWellFormed() ? text : text.toWellFormed();
  return wellFormed.includes('\u0000') ? wellFormed.replaceAll('\u0000', '\uFFFD') : wellFormed;
}
