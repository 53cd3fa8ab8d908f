// Package bound computes, for a recorded run of a prefix cache, the most
// prompt tokens any eviction policy could have served from a cache of the
// same capacity, and what a cache that never evicts would have: how far a
// run's hit rate is from the best possible one.
//
// # The model
//
// A run is a sequence of events, each a chain of whole blocks of
// BlockSize tokens under a cache salt: a block is its salt and every token
// up to its end, so equal chains under different salts never share a
// block, as the designs key them. An event is
//
//   - a lookup: a request arrives and hits the longest prefix of its
//     prompt's whole blocks that is cached (a prompt of whole blocks may
//     hit entirely, as Match reports it); its hit tokens count;
//   - a commit: the KV of some tokens is offered to the cache (Insert).
//
// The cache holds at most C blocks. After each event it holds any of the
// blocks it held and the event's blocks, at most C of them: inserting
// every block of the event and then evicting any blocks down to C is the
// same thing. The event's blocks include a lookup's own prompt, which the
// engine caches only when it commits the computed KV: the model lets the
// cache keep it at once.
//
// Requests served one after another (FromRequests) are lookup, commit,
// lookup, commit: each commits its prompt, or its prompt and the output
// whose KV it computed. A Recorder records a real run instead: a lookup at
// each sequence's first Match and a commit at each Insert, in the order the
// pool made them.
//
// # The optimum: farthest next use
//
// The next use of a block, after an event, is the next lookup whose
// prompt holds it, or never if a commit offers it again first (it then
// comes back for free) or nothing names it again. Optimal evicts, while
// the cache holds more than C, the block whose next use is farthest, the
// deepest first among equals. That is optimal, in two steps.
//
// (a) Count hits block by block instead: a lookup gains every cached block
// of its prompt, even past one that is missing. That only adds hits, so
// its optimum is at least the model's. It is paging where a block may
// enter the cache only at an event that names it, a lookup's request pays
// when the block is missing and a commit's does not, and for it farthest
// next use is optimal by Belady's exchange. Take an optimal schedule that
// agrees with the rule before event e and keeps O after it where the rule
// keeps F (O as large as F: a block more never costs a hit). If O ≠ F,
// take x in F but not O and y in O but not F: the rule kept x, so y's next
// use is no sooner than x's. Change the schedule to keep x instead of y
// and then copy it, x standing in for y, until the first event f that
// names x or y; if it drops y before, drop x, and the two agree again.
// If f names y and is a commit, y can come back at f: copy the schedule
// from f on, no hit lost. If f names y and is a lookup, it is y's next use,
// so x's is no later, and f names x too: each gains one of the two, and
// both may keep both. If f names x only and is a lookup, the change gains
// a hit at f and from then on copies the schedule without y, which costs
// at most the one hit of y's next lookup (y can come back there). If f is
// a commit naming x only, x's next use is never, so y's is too: lacking y
// costs nothing, and y comes back at its next event. Either way the
// changed schedule gains no less and agrees with the rule on one more
// block; repeating it makes it the rule's.
//
// (b) Under the rule, a lookup's cached blocks are a prefix of its
// prompt, so its hits block by block are its hits. Say a lookup at e finds
// block x cached but not its parent q. Every event naming x names q; let d
// be the last one before e naming q. From d to e no event names either, so
// both have next use e, and whenever the rule evicted one of them it took
// the deeper, x, first: q cannot be missing while x stays. So the rule's
// hits equal its hits block by block, which no schedule beats by (a), and
// so no schedule of the model beats the rule. Tests compare it with an
// exhaustive search over every eviction choice on thousands of small
// random traces (TestFarthestNextUseIsOptimal).
//
// # Trees
//
// The radix tree and the compressed trie never hold a block without its
// parent (they evict leaves); a hash index may keep a block whose parent
// it evicted, and reach it again once the parent is committed anew. The
// model allows the latter, and it can matter: at C = 2, after commits of w
// and of q,x, a cache that keeps w and x (not q) hits w, gets q back from
// a commit of q, then hits q,x: 3 blocks, where keeping parents allows 2
// (TestKeepingAChildWithoutItsParentCanWin). So Optimal bounds every
// design, and a tree may fall short of it.
//
// The same rule on leaves only (OptimalLeaves) is a schedule a tree can
// follow, but not the best one, which is why (a) does not carry over: a
// parent's next use is no later than its child's except when a commit
// brings the parent back first, and then keeping the child costs two
// blocks, which the rule does not see. At C = 2, on lookup w, commit q,q,
// commit y, lookup y, commit q, lookup q,q, lookup w: after the commit of
// q,q the rule drops w, whose next use is last, to keep q,q, whose tail it
// drops for y anyway; a tree that drops q,q at once keeps w, and hits y,
// q (back from its commit) and w: 3 blocks to the rule's 2
// (TestLeavesRuleIsNotOptimalForTrees). The best a tree
// can do lies between OptimalLeaves and Optimal: exactly known when the
// two agree, as they do on the benchmark's run (TestTreesReachTheBound).
// An exhaustive search checks the bracket on small random traces
// (TestTreesLieBetweenTheTwoRules).
//
// # Where the model is not the engine
//
// Recorded by a Recorder, every step of a real run is a schedule of the
// model: a lookup finds what Match found, a commit adds what Insert may
// add, the pool's evictions happen between events, and the cache never
// holds more blocks than the pool has. So at C = the pool's blocks, no
// design's Match hits exceed Optimal, whatever ran concurrently
// (TestRecorderBoundsEveryDesign drives every design through random
// admissions, chunks, commits, forks and evictions). The bound is loose
// where the engine has less than the model:
//
//   - Running sequences pin blocks: the pool's blocks hold their pages
//     too, so the cache has fewer than C; the more sequences run at once, the
//     looser the bound.
//   - A lookup's own blocks may stay in the model at once; the engine has
//     them only when it commits them, at each chunk's end with commit per
//     chunk, or at the prompt's end.
//   - The last token: a prompt of whole blocks may hit entirely in both,
//     though the engine recomputes its last token for the logits. The
//     commit at finish holds what the engine computed, not the last
//     sampled token, whose KV was never written.
//   - Cache tiers promote blocks on a lookup: those are not the pool's
//     hits, and a Recorder does not count them.
//
// Served one after another (FromRequests), the model differs more: each
// request sees every earlier request's commits, even ones the engine had
// not made yet, and holds them from its own turn on, where the engine's
// later commit takes room only later. So a concurrent run can beat that
// bound (TestServedOneAfterAnotherIsNoBoundForOverlaps). It is a bound for
// an engine that runs one request at a time.
//
// # Cost
//
// Recording interns every whole block in a map, one lookup per block.
// Optimal then costs O(B log B) for B blocks named by all events (each
// event's blocks pushed on a heap once); Infinite and the interning O(B).
// BenchmarkReport measures a 10,000-request run.
package bound
