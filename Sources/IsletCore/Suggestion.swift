/// "Did you mean …?" for names a caller mistyped.
public enum Suggestion {
    /// The candidate closest to `name` (case-insensitive edit distance), if it is close enough to be
    /// a typo: at most a third of the name's length, and at most 3 edits.
    public static func nearest(_ name: String, among candidates: [String]) -> String? {
        let typed = Array(name.lowercased().prefix(64))
        guard !typed.isEmpty else { return nil }
        let limit = min(3, max(1, typed.count / 3))
        var best: (name: String, distance: Int)?
        for candidate in candidates.sorted() {
            let distance = editDistance(typed, Array(candidate.lowercased()))
            if distance <= limit, distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        return best?.name
    }

    /// Levenshtein distance, one row at a time.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
