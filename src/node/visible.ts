/** Text from outside (an agent's output, a trace's labels, a file's bytes) made safe to print on a terminal. */

/** A control character as `\xNN`. */
const escaped = (c: string) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`

/**
 * Text another party chose (an agent's output, a topic it joined, a trace's labels, an error that
 * quotes a file) with control characters shown as `\xNN` (newlines and tabs kept), so terminal
 * escapes (a clear screen, a cursor move, a window title) cannot hide or forge what is printed.
 */
export function visible(text: string): string {
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, escaped)
}

/**
 * {@link visible} for text printed as one line (an event line, an error): a line break (`\n`,
 * `\r`) is shown as `\xNN` too, so text from outside cannot start a line of its own and forge one.
 */
export function visibleLine(text: string): string {
  return text.replace(/[\x00-\x08\x0a-\x1f\x7f-\x9f]/g, escaped)
}
