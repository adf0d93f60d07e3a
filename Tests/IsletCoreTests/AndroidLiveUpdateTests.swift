import Foundation
import Testing
import IsletCore

/// Issue 46: the FCM data of an Android Live Update, in the keys the Pushwoosh Android SDK (6.9.2–6.10.0,
/// `LiveUpdateStateParser` and `LiveUpdateBundleKeys`) reads.
@Suite("Android Live Updates as the Pushwoosh SDK reads them")
struct AndroidLiveUpdateTests {
    /// Every key `pw_live` may hold, as the SDK spells them.
    static let parserKeys: Set<String> = ["op", "id", "progress", "progress_indeterminate", "progress_bar", "segments", "extras", "when",
                                          "chronometer", "chronometer_count_down", "show_when"]

    static func live(_ update: AndroidLiveUpdate) throws -> JSONObject {
        let text = try #require(update.data.first { $0.key == "pw_live" }?.value)
        return try #require(try JSONParser.parse(text).objectValue, "pw_live is the JSON text of an object")
    }

    @Test func aStartCarriesEveryFieldSetInTheSDKsKeys() throws {
        var update = AndroidLiveUpdate(operation: .start, id: "ORDER_4521", title: "Order #4521", text: "Courier on the way", hash: "ABCDE-12345678-ABCDEFGH")
        update.progress = 4
        update.segments = [.init(color: "#705289", length: 3), .init(color: "#E0A030", length: 5)]
        update.progressIndeterminate = false
        update.progressBar = true
        update.when = 1_800_000_000_000
        update.chronometer = true
        update.chronometerCountDown = true
        update.showWhen = true
        update.extras = ["eta": "12 min"]
        #expect(update.data.map(\.key) == ["pw_msg", "header", "title", "p", "pw_live"])
        #expect(update.data.first?.value == "1", "pw_msg: without it the SDK ignores the push")
        #expect(update.data.first { $0.key == "header" }?.value == "Order #4521", "the notification's title")
        #expect(update.data.first { $0.key == "title" }?.value == "Courier on the way", "the SDK's `title` is the text")
        let live = try Self.live(update)
        #expect(Set(live.entries.map(\.key)) == Self.parserKeys, "every key the SDK reads, none it does not")
        #expect(live["op"] == "OPERATION_START" && live["id"] == "ORDER_4521")
        #expect(live["progress"] == .int(4) && live["when"] == .int(1_800_000_000_000))
        #expect(live["segments"] == [["color": "#705289", "length": 3], ["color": "#E0A030", "length": 5]])
        #expect(live["chronometer_count_down"] == true && live["show_when"] == true && live["progress_bar"] == true)
        #expect(live["extras"] == ["eta": "12 min"])
    }

    @Test func anUpdateCarriesOnlyWhatIsSetAndAnEndOnlyItsOperationAndId() throws {
        var update = AndroidLiveUpdate(operation: .update, id: "ORDER_1")
        update.progress = 0
        #expect(update.data.map(\.key) == ["pw_msg", "pw_live"], "no header: the SDK shows the app's name")
        #expect(try Self.live(update) == ["op": "OPERATION_UPDATE", "id": "ORDER_1", "progress": 0])
        var end = AndroidLiveUpdate(operation: .end, id: "ORDER_1", title: "Delivered")
        end.progress = 8
        end.segments = [.init(color: "#705289", length: 8)]
        #expect(try Self.live(end) == ["op": "OPERATION_END", "id": "ORDER_1"], "the SDK dismisses it, reading nothing else")
        #expect(AndroidLiveUpdate.Operation.allCases.map(\.rawValue) == ["OPERATION_START", "OPERATION_UPDATE", "OPERATION_END"],
                "the SDK matches the full names exactly")
    }

    @Test func textIsCarriedAsItCameEscapedInsidePwLive() throws {
        var update = AndroidLiveUpdate(operation: .update, id: "id \"quoted\" ✓")
        update.extras = ["note": "line\nbreak"]
        let live = try Self.live(update)
        #expect(live["id"] == "id \"quoted\" ✓" && live["extras"] == ["note": "line\nbreak"])
    }
}
