/// Timers of one event loop, ordered by deadline in a binary heap: O(log n) to add, cancel and fire,
/// however many are waiting. Cancelled timers are dropped lazily when they reach the top.
struct TimerHeap {
    private struct Entry {
        let deadline: ContinuousClock.Instant
        let id: Int
    }

    private var heap: [Entry] = []
    private var bodies: [Int: () -> Void] = [:]
    private var nextID = 0

    /// Timers scheduled and neither fired nor cancelled.
    var count: Int { bodies.count }

    mutating func add(_ deadline: ContinuousClock.Instant, _ body: @escaping () -> Void) -> Int {
        nextID += 1
        bodies[nextID] = body
        heap.append(Entry(deadline: deadline, id: nextID))
        siftUp(heap.count - 1)
        return nextID
    }

    mutating func cancel(_ id: Int) {
        bodies[id] = nil
        // Keep cancelled entries from piling up when timers are re-armed far more often than they fire.
        if heap.count > 64 && heap.count > bodies.count * 4 { rebuild() }
    }

    /// The earliest live deadline.
    mutating func nextDeadline() -> ContinuousClock.Instant? {
        dropCancelledTop()
        return heap.first?.deadline
    }

    /// Removes and returns the body of the earliest timer due at `now`, if any.
    mutating func popDue(_ now: ContinuousClock.Instant) -> (() -> Void)? {
        dropCancelledTop()
        guard let top = heap.first, top.deadline <= now else { return nil }
        removeTop()
        return bodies.removeValue(forKey: top.id)
    }

    mutating func removeAll() {
        heap = []
        bodies = [:]
    }

    private mutating func dropCancelledTop() {
        while let top = heap.first, bodies[top.id] == nil { removeTop() }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func rebuild() {
        heap.removeAll { bodies[$0.id] == nil }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private func before(_ a: Entry, _ b: Entry) -> Bool { a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id) }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = parent * 2 + 1, right = left + 1
            var first = parent
            if left < heap.count && before(heap[left], heap[first]) { first = left }
            if right < heap.count && before(heap[right], heap[first]) { first = right }
            guard first != parent else { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}
