// Package scope owns what a crawl job may fetch (DESIGN.md §8, issue 12
// scopes 3 and 4): one place decides, for every URL a page links to,
// whether it becomes a page of the job, and with which flags.
//
//   - URL scope, as ArchiveBot's: pages on the start URL's host are
//     followed (Config.Subdomains adds its subdomains, Config.PathPrefix
//     keeps them below the start URL's directory); page requisites
//     (stylesheets, images, scripts) are taken from any host; a link to
//     another host is fetched once without following its links
//     (Config.OffsiteOnce, ArchiveBot's default) or not at all.
//   - Job ignores (IDENT_ignores, live): ArchiveBot's patterns with its
//     {primary_url} and {primary_netloc} placeholders; an ignored URL is
//     never queued and is reported with the raw pattern (Ignores).
//   - Rules (mnbot): an ordered list of URL patterns, each setting any of
//     accept, skip and ua; for each setting the last matching rule wins
//     (RuleSet.Eval). accept=true puts a URL in scope (followed) whatever
//     the URL scope says, accept=false keeps it out; skip and ua apply when a page
//     is dequeued. Rules are versioned (Versioned) so an attempt keeps the
//     version it used.
//   - The fetch deny policy (issue 17) plugs in as a Denier.
//
// Judge combines them in one order: canonical URL (fragment dropped,
// normalised as the ident is), deny policy, scope and accept rules, then
// ignores. The package is pure (no I/O): workflows validate rules with it,
// activities judge links with it.
package scope
