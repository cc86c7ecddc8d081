import { Layout, type PageContext } from './layout.tsx'

/** A page that says what went wrong; its handler answers it with the status that fits. */
export function problemPage(page: PageContext, title: string, message: string) {
  return (
    <Layout page={page} title={title}>
      <p class="error" role="alert">
        {message}
      </p>
      <p>
        <a href="/console">Back to the overview</a>
      </p>
    </Layout>
  )
}
