/**
 * What on a page is wider than its box, measured in the browser: the page
 * itself, and every box in it whose content reaches past its right edge
 * (`scrollWidth` beyond `clientWidth`). A table that scrolls sideways inside
 * its own container is a choice, not a clipping, when the container can be
 * reached by keyboard and is named — the caller says where that is allowed.
 */
import type { Page } from 'playwright-core'

/** One box whose content is wider than it. */
export type Overflow = {
  /** Tag, class and name (aria-label, heading or id) of the box. */
  box: string
  scrollWidth: number
  clientWidth: number
  /** Whether the box scrolls sideways itself and is a named region reached by Tab. */
  scrollRegion: boolean
  /** Whether it is a table that stacks its rows on a phone (class `stack`): it should never need to scroll there. */
  stacked: boolean
}

/** Boxes checked: the page, its main parts, and every block that holds text or a table. */
const BOXES =
  'html, body, header, main, main :is(div, section, p, dl, dd, ul, ol, li, form, label, pre, h1, h2, table, td, th)'

/**
 * The boxes of the page whose content is wider than they are, each with its
 * two widths and whether it is a scroll region (the caller decides where one
 * may scroll). A pixel of rounding is not an overflow.
 */
export function overflowsOf(page: Page): Promise<Overflow[]> {
  return page.evaluate((selector) => {
    const nameOf = (element: Element) =>
      element.getAttribute('aria-label') ??
      element.querySelector('h1, h2')?.textContent?.trim() ??
      (element.id ? `#${element.id}` : (element.textContent ?? '').trim().slice(0, 40))
    return Array.from(document.querySelectorAll(selector)).flatMap((element) => {
      const { scrollWidth, clientWidth } = element
      if (clientWidth === 0 || scrollWidth <= clientWidth + 1) return []
      const style = getComputedStyle(element)
      const scrolls = style.overflowX === 'auto' || style.overflowX === 'scroll'
      const named = element.hasAttribute('aria-label') || element.hasAttribute('aria-labelledby')
      const focusable = element.getAttribute('tabindex') === '0'
      const className = typeof element.className === 'string' && element.className ? `.${element.className}` : ''
      return [
        {
          box: `${element.tagName.toLowerCase()}${className} "${nameOf(element)}"`,
          scrollWidth,
          clientWidth,
          scrollRegion: scrolls && named && focusable,
          stacked: element.classList.contains('stack'),
        },
      ]
    })
  }, BOXES)
}
