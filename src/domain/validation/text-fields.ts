import { badRequest } from "../errors/domain-error.js";

/**
 * Bounds of the free text a client sets (issue 34): names (an account's, a
 * route's) and URLs (callback_url, input image URLs, webhooks). Counted in
 * characters (Unicode code points), so any script gets the same room.
 */
export const MAX_NAME_CHARACTERS = 200;
export const MAX_URL_CHARACTERS = 2048;

/** 400 field_too_long, naming the field, when `value` has more than `max` characters. */
export function checkTextLength(field: string, value: string, max: number): void {
  // Code points never outnumber UTF-16 units: only a long string is counted.
  if (value.length <= max) return;
  let characters = 0;
  for (const _ of value) if (++characters > max) break;
  if (characters > max) {
    throw badRequest("field_too_long", `${field} may be at most ${max} characters`, { field, limit: max });
  }
}
