//! Tests of the phone model, driven as an agent drives it: find an element
//! in the UI tree, act at its centre, check the typed state.

use super::*;
use crate::device::elements::screen_elements;
use crate::device::ui::{parse_uiautomator_xml, to_uiautomator_xml};
use crate::protocol::{FrameMap, Size};
use proptest::prelude::*;

fn phone() -> Phone {
    Phone::new(PhoneConfig::default())
}

fn find_id(p: &Phone, id: &str) -> UiNode {
    p.ui_tree()
        .find_by_id(id)
        .cloned()
        .unwrap_or_else(|| panic!("no node with id {id}"))
}

fn has_id(p: &Phone, id: &str) -> bool {
    p.ui_tree().find_by_id(id).is_some()
}

fn has_text(p: &Phone, text: &str) -> bool {
    p.ui_tree().find_by_text(text).is_some()
}

fn tap_node(p: &mut Phone, n: &UiNode) {
    let (x, y) = n.center();
    p.tap(x, y);
}

fn tap_id(p: &mut Phone, id: &str) {
    let n = find_id(p, id);
    tap_node(p, &n);
}

fn tap_text(p: &mut Phone, text: &str) {
    let n = p
        .ui_tree()
        .find_by_text(text)
        .cloned()
        .unwrap_or_else(|| panic!("no node with text {text:?}"));
    tap_node(p, &n);
}

/// Taps the launcher icon of the app labelled `label`.
fn launch(p: &mut Phone, label: &str) {
    p.key(Key::Home);
    let icon = p
        .ui_tree()
        .find(|n| n.content_desc == label && n.clickable)
        .cloned()
        .unwrap_or_else(|| panic!("no launcher icon {label}"));
    tap_node(p, &icon);
}

/// A finger swipe up across the middle of the screen: reveals what is below.
fn swipe_up(p: &mut Phone) {
    let (w, h) = p.size();
    let (x, y1, y2) = (w as i32 / 2, h as i32 * 3 / 4, h as i32 / 4);
    p.swipe(x, y1, x, y2, 300);
}

#[test]
fn every_screen_round_trips_through_xml() {
    let mut p = phone();
    for label in [
        "Settings", "Contacts", "Notes", "Clock", "Browser", "Gallery",
    ] {
        launch(&mut p, label);
        let tree = p.ui_tree();
        assert_eq!(
            parse_uiautomator_xml(&to_uiautomator_xml(&tree)),
            Ok(tree),
            "{label}"
        );
    }
}

#[test]
fn every_app_opens_from_its_launcher_icon() {
    let mut p = phone();
    assert_eq!(
        p.focused_window(),
        "com.btl.launcher/com.btl.launcher.Launcher"
    );
    for (label, package) in [
        ("Settings", "com.btl.settings"),
        ("Contacts", "com.btl.contacts"),
        ("Notes", "com.btl.notes"),
        ("Clock", "com.btl.clock"),
        ("Browser", "com.btl.browser"),
        ("Gallery", "com.btl.gallery"),
    ] {
        launch(&mut p, label);
        assert_eq!(
            p.focused_window(),
            format!("{package}/{package}.MainActivity")
        );
        assert_eq!(p.ui_tree().package, package);
        assert!(p.installed_packages().contains(&package.to_string()));
    }
}

#[test]
fn launcher_icons_are_drawn_where_the_tree_says() {
    let p = phone();
    let img = p.render();
    let tree = p.ui_tree();
    let icon = tree.find(|n| n.content_desc == "Contacts").unwrap();
    // The badge sits at the top centre of the icon's bounds.
    let [x1, y1, x2, _] = icon.bounds;
    let px = img.get_pixel(((x1 + x2) / 2) as u32, (y1 + p.dp(30.0)) as u32);
    assert_eq!(px.0, [0x1A, 0x73, 0xE8, 255]);
}

/// The lines a text agent reads on `p`'s screen, as (label, checked).
fn listed(p: &Phone) -> Vec<(String, Option<bool>)> {
    let (w, h) = p.size();
    let frame = FrameMap::new(Size::new(w, h), 200_704).unwrap();
    screen_elements(&p.ui_tree(), &frame, &[] as &[&str])
        .into_iter()
        .map(|line| (line.label, line.checked))
        .collect()
}

#[test]
fn switches_are_named_by_what_they_switch() {
    let mut p = phone();
    launch(&mut p, "Settings");
    let s = p.state().settings.clone();
    let lines = listed(&p);
    for (name, on) in [
        ("Wi-Fi", s.wifi),
        ("Bluetooth", s.bluetooth),
        ("Airplane mode", s.airplane_mode),
    ] {
        assert!(
            lines.contains(&(name.to_string(), Some(on))),
            "{name}: {lines:?}"
        );
    }
    tap_text(&mut p, "Location");
    assert!(listed(&p).contains(&("Use location".to_string(), Some(s.location))));

    let state = p.state_mut();
    state.alarms.clear();
    for (id, hour, enabled) in [(1, 7, true), (2, 19, false)] {
        state.alarms.push(Alarm {
            id,
            hour,
            minute: 30,
            enabled,
            label: String::new(),
        });
    }
    launch(&mut p, "Clock");
    let switches: Vec<_> = listed(&p)
        .into_iter()
        .filter(|(_, c)| c.is_some())
        .collect();
    assert_eq!(
        switches,
        [
            ("07:30".to_string(), Some(true)),
            ("19:30".to_string(), Some(false))
        ]
    );
}

#[test]
fn wifi_switch_and_settings_store_agree() {
    let mut p = phone();
    launch(&mut p, "Settings");
    assert!(p.state().settings.wifi);
    assert!(find_id(&p, "wifi_switch").checked);
    tap_id(&mut p, "com.btl.settings:id/wifi_switch");
    assert!(!p.state().settings.wifi);
    assert_eq!(p.settings_get("global", "wifi_on").as_deref(), Some("0"));
    assert!(!find_id(&p, "wifi_switch").checked);
    // Tapping the row's title toggles too, like a SwitchPreference.
    tap_text(&mut p, "Bluetooth");
    let bt = p.state().settings.bluetooth;
    assert_eq!(
        p.settings_get("global", "bluetooth_on").as_deref(),
        Some(if bt { "1" } else { "0" })
    );
    tap_id(&mut p, "airplane_switch");
    assert!(p.state().settings.airplane_mode);
    assert!(has_id(&p, "com.android.systemui:id/airplane"));
    // And the store drives the switch.
    p.settings_put("global", "wifi_on", "1");
    assert!(find_id(&p, "wifi_switch").checked);
    assert!(has_id(&p, "wifi_signal"));
}

#[test]
fn settings_store_types_and_namespaces() {
    let mut p = phone();
    p.settings_put("system", "screen_brightness", "300");
    assert_eq!(p.state().settings.brightness, 255);
    p.settings_put("system", "screen_brightness", "bright");
    assert_eq!(p.state().settings.brightness, 255);
    p.settings_put("secure", "location_mode", "0");
    assert!(!p.state().settings.location);
    p.settings_put("global", "my_flag", "hello world");
    assert_eq!(
        p.settings_get("global", "my_flag").as_deref(),
        Some("hello world")
    );
    p.settings_put("bogus", "k", "v");
    assert_eq!(p.settings_get("bogus", "k"), None);
    assert_eq!(p.settings_get("global", "missing"), None);
    let global = p.settings_list("global");
    assert!(global.iter().any(|(k, v)| k == "wifi_on" && v == "1"));
    assert!(global.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(
        p.getprop("ro.product.model").as_deref(),
        Some("BTL Virtual Phone")
    );
    assert_eq!(p.getprop("ro.sf.lcd_density").as_deref(), Some("420"));
    assert!(p.setprop("ro.product.model", "x").is_err());
    p.setprop("debug.btl", "1").unwrap();
    assert_eq!(p.getprop("debug.btl").as_deref(), Some("1"));
}

#[test]
fn brightness_slider_follows_taps_and_drags() {
    let mut p = phone();
    launch(&mut p, "Settings");
    tap_text(&mut p, "Display");
    assert_eq!(
        p.focused_window(),
        "com.btl.settings/com.btl.settings.SubSettings"
    );
    let bar = find_id(&p, "brightness_seekbar");
    assert_eq!(bar.class, "android.widget.SeekBar");
    let [x1, _, x2, _] = bar.bounds;
    let pad = p.dp(12.0);
    let (_, y) = bar.center();
    p.tap(x1 + pad + (x2 - x1 - 2 * pad) * 3 / 4, y);
    assert!(
        (190..=192).contains(&p.state().settings.brightness),
        "{}",
        p.state().settings.brightness
    );
    assert_eq!(find_id(&p, "brightness_value").text, "75%");
    p.swipe(bar.center().0, y, x1 - 50, y, 400);
    assert_eq!(p.state().settings.brightness, 0);
    p.swipe(x1 + pad, y, x2 + 10, y, 400);
    assert_eq!(
        p.settings_get("system", "screen_brightness").as_deref(),
        Some("255")
    );
    p.key(Key::Back);
    assert_eq!(
        p.focused_window(),
        "com.btl.settings/com.btl.settings.MainActivity"
    );
}

#[test]
fn settings_list_scrolls_to_reveal_items_below_the_fold() {
    let mut p = phone();
    launch(&mut p, "Settings");
    let list = find_id(&p, "settings_list");
    assert!(list.scrollable);
    assert!(!has_text(&p, "About phone"));
    for _ in 0..4 {
        swipe_up(&mut p);
    }
    assert!(has_text(&p, "About phone"));
    assert!(!has_text(&p, "Wi-Fi"));
    // Every visible row lies inside the list's bounds.
    let tree = p.ui_tree();
    let list = tree.find_by_id("settings_list").unwrap();
    for row in &list.children {
        assert!(row.bounds[1] >= list.bounds[1] && row.bounds[3] <= list.bounds[3]);
    }
    tap_text(&mut p, "About phone");
    assert!(has_text(&p, "BTL Virtual Phone"));
    p.key(Key::Back);
    assert!(
        has_text(&p, "About phone"),
        "the list keeps its scroll position"
    );
    // Swiping down goes back to the top; overscroll is clamped.
    let (w, h) = p.size();
    for _ in 0..6 {
        p.swipe(
            w as i32 / 2,
            h as i32 / 4,
            w as i32 / 2,
            h as i32 * 3 / 4,
            300,
        );
    }
    assert!(has_text(&p, "Wi-Fi"));
}

#[test]
fn adding_a_contact_through_the_form() {
    let mut p = phone();
    launch(&mut p, "Contacts");
    let before = p.state().contacts.len();
    tap_id(&mut p, "fab_add");
    assert_eq!(
        p.focused_window(),
        "com.btl.contacts/com.btl.contacts.ContactEditorActivity"
    );
    // An empty field reports its hint as text, as Android's does.
    assert_eq!(find_id(&p, "name_field").text, "Name");
    tap_id(&mut p, "name_field");
    assert!(p.keyboard_visible());
    assert!(find_id(&p, "name_field").focused);
    p.input_text("Zoë Ångström");
    p.key(Key::Enter);
    assert!(
        find_id(&p, "phone_field").focused,
        "Enter moves to the next field"
    );
    p.input_text("+1 555 0100");
    tap_id(&mut p, "email_field");
    p.input_text("zoe@example.com");
    tap_id(&mut p, "save_button");
    assert_eq!(p.state().contacts.len(), before + 1);
    let c = p.state().contact_named("zoë ångström").unwrap().clone();
    assert_eq!(
        (c.phone.as_str(), c.email.as_str()),
        ("+1 555 0100", "zoe@example.com")
    );
    assert!(!p.keyboard_visible());
    assert_eq!(find_id(&p, "contact_name").text, "Zoë Ångström");
    // Edit it.
    tap_id(&mut p, "edit_button");
    tap_id(&mut p, "phone_field");
    for _ in 0.."0100".len() {
        p.key(Key::Del);
    }
    p.input_text("0199");
    tap_id(&mut p, "save_button");
    assert_eq!(p.state().contact(c.id).unwrap().phone, "+1 555 0199");
    assert_eq!(find_id(&p, "contact_phone").text, "+1 555 0199");
    // Back to the list, where the new contact can be scrolled to.
    p.key(Key::Back);
    let mut seen = has_text(&p, "Zoë Ångström");
    for _ in 0..6 {
        swipe_up(&mut p);
        seen |= has_text(&p, "Zoë Ångström");
    }
    assert!(seen);
}

#[test]
fn deleting_a_contact_asks_first() {
    let mut p = phone();
    launch(&mut p, "Contacts");
    let first = p.ui_tree().find_by_id("contact_name").unwrap().text.clone();
    tap_text(&mut p, &first);
    tap_id(&mut p, "delete_button");
    assert!(has_id(&p, "android:id/alertTitle"));
    tap_text(&mut p, "Cancel");
    assert!(p.state().contact_named(&first).is_some());
    tap_id(&mut p, "delete_button");
    tap_id(&mut p, "android:id/button1");
    assert!(p.state().contact_named(&first).is_none());
    assert_eq!(
        p.focused_window(),
        "com.btl.contacts/com.btl.contacts.MainActivity"
    );
}

#[test]
fn creating_and_deleting_a_note() {
    let mut p = phone();
    launch(&mut p, "Notes");
    let before = p.state().notes.len();
    tap_id(&mut p, "fab_new_note");
    tap_id(&mut p, "title_field");
    p.input_text("Trip & plans");
    p.key(Key::Enter);
    p.input_text("Book train");
    p.key(Key::Enter);
    p.input_text("Pack 🎒");
    tap_id(&mut p, "save_button");
    assert_eq!(p.state().notes.len(), before + 1);
    let note = p.state().note_titled("Trip & plans").unwrap().clone();
    assert_eq!(note.body, "Book train\nPack 🎒");
    assert_eq!(
        note.modified_ms,
        p.state().notes.iter().map(|n| n.modified_ms).max().unwrap()
    );
    // Newest first in the list.
    assert_eq!(find_id(&p, "note_title").text, "Trip & plans");
    tap_text(&mut p, "Trip & plans");
    tap_id(&mut p, "delete_button");
    assert_eq!(find_id(&p, "android:id/alertTitle").text, "Delete note?");
    p.key(Key::Back);
    assert!(
        !has_id(&p, "android:id/alertTitle"),
        "Back closes the dialog"
    );
    tap_id(&mut p, "delete_button");
    tap_text(&mut p, "Delete");
    assert!(p.state().note_titled("Trip & plans").is_none());
    assert_eq!(p.state().notes.len(), before);
}

#[test]
fn back_leaves_the_note_editor_without_saving() {
    let mut p = phone();
    launch(&mut p, "Notes");
    let before = p.state().notes.clone();
    tap_id(&mut p, "fab_new_note");
    tap_id(&mut p, "body_field");
    p.input_text("draft");
    p.key(Key::Back);
    assert!(!p.keyboard_visible());
    assert!(
        has_id(&p, "body_field"),
        "the first Back only hides the keyboard"
    );
    p.key(Key::Back);
    assert_eq!(p.state().notes, before);
    assert_eq!(
        p.focused_window(),
        "com.btl.notes/com.btl.notes.MainActivity"
    );
    // "Navigate up" leaves at once, keyboard or not.
    tap_id(&mut p, "fab_new_note");
    tap_id(&mut p, "title_field");
    let up = p.ui_tree().find_by_desc("Navigate up").cloned().unwrap();
    tap_node(&mut p, &up);
    assert!(!p.keyboard_visible());
    assert_eq!(
        p.focused_window(),
        "com.btl.notes/com.btl.notes.MainActivity"
    );
}

#[test]
fn creating_an_alarm_at_07_30() {
    let mut p = phone();
    launch(&mut p, "Clock");
    tap_id(&mut p, "fab_add_alarm");
    assert_eq!(find_id(&p, "hour").text, "08");
    tap_id(&mut p, "hour_down");
    assert_eq!(find_id(&p, "hour").text, "07");
    // Typing replaces a number field's value, as on a picker.
    tap_id(&mut p, "minute");
    p.input_text("30");
    tap_id(&mut p, "label_field");
    p.input_text("Gym");
    tap_id(&mut p, "save_button");
    let alarm = p.state().alarm_at(7, 30).unwrap().clone();
    assert!(alarm.enabled);
    assert_eq!(alarm.label, "Gym");
    assert!(has_text(&p, "07:30"));
    // The list's switch turns it off.
    let tree = p.ui_tree();
    let item = tree
        .find_all(|n| n.has_id("alarm_item"))
        .into_iter()
        .find(|n| n.find_by_text("07:30").is_some())
        .unwrap()
        .clone();
    tap_node(&mut p, item.find_by_id("alarm_switch").unwrap());
    assert!(!p.state().alarm(alarm.id).unwrap().enabled);
    // Open it and delete it.
    tap_text(&mut p, "07:30");
    tap_id(&mut p, "delete_button");
    assert!(p.state().alarm_at(7, 30).is_none());
}

#[test]
fn alarm_pickers_wrap_and_reject_bad_times() {
    let mut p = phone();
    launch(&mut p, "Clock");
    tap_id(&mut p, "fab_add_alarm");
    tap_id(&mut p, "minute_down");
    assert_eq!(find_id(&p, "minute").text, "59");
    for _ in 0..16 {
        tap_id(&mut p, "hour_up");
    }
    assert_eq!(find_id(&p, "hour").text, "00");
    tap_id(&mut p, "hour");
    p.input_text("25");
    let before = p.state().alarms.len();
    tap_id(&mut p, "save_button");
    assert_eq!(p.state().alarms.len(), before);
    assert!(has_id(&p, "com.btl.clock:id/error"));
    tap_id(&mut p, "hour");
    p.key(Key::Del);
    p.input_text("6");
    tap_id(&mut p, "save_button");
    assert!(p.state().alarm_at(6, 59).is_some());
}

#[test]
fn searching_and_opening_a_result() {
    let mut p = phone();
    launch(&mut p, "Browser");
    tap_id(&mut p, "search_box");
    p.input_text("rust borrow checker");
    p.key(Key::Enter);
    assert_eq!(
        p.state().browser.last_query.as_deref(),
        Some("rust borrow checker")
    );
    assert!(!p.keyboard_visible());
    let expected = search_results("rust borrow checker");
    assert_eq!(expected.len(), 8);
    assert_eq!(find_id(&p, "result_title").text, expected[0].title);
    assert_eq!(
        search_results("  rust borrow checker "),
        expected,
        "results are a function of the query"
    );
    tap_text(&mut p, &expected[1].title);
    assert_eq!(
        p.state().browser.visited,
        [format!("https://{}", expected[1].url)]
    );
    assert_eq!(find_id(&p, "page_title").text, expected[1].title);
    // The page is longer than the screen.
    assert!(find_id(&p, "page_content").scrollable);
    p.key(Key::Back);
    assert!(has_id(&p, "results_list"));
    // The Search button submits too.
    tap_id(&mut p, "search_box");
    for _ in 0.."rust borrow checker".len() {
        p.key(Key::Del);
    }
    p.input_text("tea");
    tap_id(&mut p, "search_button");
    assert_eq!(p.state().browser.searches, ["rust borrow checker", "tea"]);
    p.key(Key::Back);
    p.key(Key::Back);
    assert!(has_text(&p, "Recent searches"));
    tap_text(&mut p, "rust borrow checker");
    assert_eq!(p.state().browser.searches.len(), 3);
}

#[test]
fn long_press_selects_photos_and_delete_confirms() {
    let mut p = phone();
    launch(&mut p, "Gallery");
    let before = p.state().files.len();
    let tree = p.ui_tree();
    let items: Vec<UiNode> = tree
        .find_all(|n| n.has_id("photo_item"))
        .into_iter()
        .cloned()
        .collect();
    assert!(items[0].long_clickable);
    let (a, b) = (items[0].content_desc.clone(), items[4].content_desc.clone());
    let (x, y) = items[0].center();
    p.long_press(x, y);
    assert_eq!(find_id(&p, "toolbar_title").text, "1 selected");
    // `input swipe x y x y 800` is a long press too; in selection mode a tap
    // toggles.
    let (x, y) = items[4].center();
    p.swipe(x, y, x, y, 800);
    assert_eq!(find_id(&p, "toolbar_title").text, "2 selected");
    assert!(find_id(&p, "photo_check").checked);
    tap_id(&mut p, "delete_button");
    assert_eq!(
        find_id(&p, "android:id/alertTitle").text,
        "Delete 2 photos?"
    );
    tap_id(&mut p, "android:id/button1");
    assert_eq!(p.state().files.len(), before - 2);
    assert!(p.state().file(&a).is_none() && p.state().file(&b).is_none());
    assert_eq!(find_id(&p, "toolbar_title").text, "Gallery");
}

#[test]
fn gallery_grid_scrolls_and_opens_photos() {
    let mut p = phone();
    launch(&mut p, "Gallery");
    let oldest = p
        .state()
        .files
        .iter()
        .min_by_key(|f| f.taken_ms)
        .unwrap()
        .name
        .clone();
    assert!(p.ui_tree().find_by_desc(&oldest).is_none());
    for _ in 0..4 {
        swipe_up(&mut p);
    }
    let photo = p.ui_tree().find_by_desc(&oldest).cloned().unwrap();
    tap_node(&mut p, &photo);
    assert_eq!(
        p.focused_window(),
        "com.btl.gallery/com.btl.gallery.PhotoViewActivity"
    );
    assert_eq!(find_id(&p, "photo_view").content_desc, oldest);
    tap_id(&mut p, "delete_button");
    tap_text(&mut p, "Delete");
    assert!(p.state().file(&oldest).is_none());
    assert_eq!(
        p.focused_window(),
        "com.btl.gallery/com.btl.gallery.MainActivity"
    );
}

#[test]
fn keyboard_shows_for_a_focused_field_and_back_hides_it() {
    let mut p = phone();
    launch(&mut p, "Browser");
    assert!(!has_id(&p, "com.btl.inputmethod:id/keyboard_view"));
    tap_id(&mut p, "search_box");
    let kb = find_id(&p, "com.btl.inputmethod:id/keyboard_view");
    assert_eq!(kb.package, "com.btl.inputmethod");
    let (_, h) = p.size();
    assert!(kb.bounds[1] > h as i32 / 2 && kb.bounds[3] <= h as i32);
    // Its keys type.
    for key in ["key_h", "key_i", "key_space", "key_2"] {
        tap_id(&mut p, key);
    }
    tap_id(&mut p, "key_del");
    assert_eq!(find_id(&p, "search_box").text, "hi ");
    p.key(Key::Back);
    assert!(!p.keyboard_visible());
    assert!(!has_id(&p, "keyboard_view"));
    // Text still goes to the focused field, as `input text` does.
    p.input_text("x");
    assert_eq!(find_id(&p, "search_box").text, "hi x");
    p.key(Key::Other(29));
    assert_eq!(find_id(&p, "search_box").text, "hi xa");
    // Going home drops the focus; typing then goes nowhere.
    p.key(Key::Home);
    p.input_text("lost");
    launch(&mut p, "Browser");
    assert_eq!(find_id(&p, "search_box").text, "hi xa");
}

#[test]
fn navigation_keys_home_back_and_recents() {
    let mut p = phone();
    launch(&mut p, "Notes");
    tap_id(&mut p, "fab_new_note");
    p.key(Key::Home);
    assert_eq!(
        p.focused_window(),
        "com.btl.launcher/com.btl.launcher.Launcher"
    );
    // The app resumes where it was left.
    launch(&mut p, "Notes");
    assert!(p.focused_window().ends_with("NoteEditorActivity"));
    launch(&mut p, "Clock");
    p.key(Key::AppSwitch);
    assert!(p.focused_window().ends_with("RecentsActivity"));
    let cards: Vec<String> = p
        .ui_tree()
        .find_all(|n| n.has_id("task_card"))
        .iter()
        .map(|n| n.text.clone())
        .collect();
    assert_eq!(cards, ["Clock", "Notes"]);
    tap_text(&mut p, "Notes");
    assert!(p.focused_window().ends_with("NoteEditorActivity"));
    p.key(Key::Back);
    p.key(Key::Back);
    assert_eq!(
        p.focused_window(),
        "com.btl.launcher/com.btl.launcher.Launcher"
    );
    // The navigation bar's buttons are keys too.
    launch(&mut p, "Settings");
    tap_id(&mut p, "com.android.systemui:id/home");
    assert!(p.focused_window().starts_with("com.btl.launcher/"));
    p.key(Key::AppSwitch);
    tap_id(&mut p, "clear_all");
    p.key(Key::AppSwitch);
    assert!(has_id(&p, "empty_recents"));
    p.key(Key::Back);
    assert!(p.focused_window().ends_with("Launcher"));
}

#[test]
fn start_app_resolves_activities_like_am_start() {
    let mut p = phone();
    p.start_app("com.btl.notes", None).unwrap();
    tap_id(&mut p, "fab_new_note");
    p.start_app("com.btl.notes", Some(".MainActivity")).unwrap();
    assert_eq!(
        p.focused_window(),
        "com.btl.notes/com.btl.notes.MainActivity"
    );
    p.start_app("com.btl.clock", Some("com.btl.clock.MainActivity"))
        .unwrap();
    assert!(
        p.start_app("com.btl.clock", Some(".Nope"))
            .unwrap_err()
            .contains("does not exist")
    );
    assert!(p.start_app("com.example.missing", None).is_err());
    assert!(
        p.start_app("android", None).is_err(),
        "installed, but nothing to launch"
    );
    for package in p.launchable_packages() {
        p.start_app(&package, None).unwrap();
        assert!(p.focused_window().starts_with(&format!("{package}/")));
    }
    p.start_app("com.btl.launcher", None).unwrap();
    assert!(p.focused_window().ends_with("Launcher"));
    p.start_app("com.btl.clock", None).unwrap();
    tap_id(&mut p, "fab_add_alarm");
    p.force_stop("com.btl.clock");
    assert!(p.focused_window().ends_with("Launcher"));
    p.start_app("com.btl.clock", None).unwrap();
    assert!(p.focused_window().ends_with("MainActivity"));
}

#[test]
fn key_names_and_codes() {
    assert_eq!(Key::from_name("KEYCODE_BACK"), Some(Key::Back));
    assert_eq!(Key::from_name("HOME"), Some(Key::Home));
    assert_eq!(Key::from_name("keycode_back"), Some(Key::Back));
    assert_eq!(Key::from_name("KEYCODE_ENTER"), Some(Key::Enter));
    assert_eq!(Key::from_name("KEYCODE_DEL"), Some(Key::Del));
    assert_eq!(Key::from_name("KEYCODE_APP_SWITCH"), Some(Key::AppSwitch));
    assert_eq!(Key::from_name("66"), Some(Key::Enter));
    assert_eq!(Key::from_name("KEYCODE_A"), Some(Key::Other(29)));
    assert_eq!(Key::from_name("KEYCODE_9"), Some(Key::Other(16)));
    assert_eq!(Key::from_name("KEYCODE_NOPE"), None);
    assert_eq!(Key::from_keycode(187), Key::AppSwitch);
    assert_eq!(Key::from_keycode(26), Key::Other(26));
    assert_eq!(Key::Other(62).typed_char(), Some(' '));
    assert_eq!(Key::Other(54).typed_char(), Some('z'));
    assert_eq!(Key::Back.keycode(), 4);
}

#[test]
fn render_has_the_configured_size_and_screens_differ() {
    let mut p = Phone::new(PhoneConfig {
        width: 720,
        height: 1600,
        density: 280,
        seed: 3,
    });
    let home = p.render();
    assert_eq!(home.dimensions(), (720, 1600));
    launch(&mut p, "Settings");
    let settings = p.render();
    assert_eq!(settings.dimensions(), (720, 1600));
    assert_ne!(home.as_raw(), settings.as_raw());
    tap_id(&mut p, "wifi_switch");
    assert_ne!(settings.as_raw(), p.render().as_raw());
    let root = p.ui_tree();
    assert_eq!(root.bounds, [0, 0, 720, 1600]);
    assert_eq!(p.size(), (720, 1600));
    assert_eq!(p.density(), 280);
}

#[test]
fn the_same_seed_gives_the_same_phone() {
    let run = |seed| {
        let mut p = Phone::new(PhoneConfig {
            seed,
            ..PhoneConfig::default()
        });
        launch(&mut p, "Contacts");
        swipe_up(&mut p);
        tap_id(&mut p, "fab_add");
        tap_id(&mut p, "name_field");
        p.input_text("Same");
        (
            p.render().into_raw(),
            p.ui_tree(),
            p.state().clone(),
            p.now_ms(),
        )
    };
    assert!(run(7) == run(7));
    let (a, b) = (run(7), run(8));
    assert_ne!(a.2, b.2);
    assert_ne!(a.0, b.0);
}

#[test]
fn the_clock_only_moves_with_the_phone() {
    let mut p = phone();
    let t0 = p.now_ms();
    assert_eq!(t0, system::BOOT_EPOCH_MS);
    assert_eq!(find_id(&p, "com.android.systemui:id/clock").text, "09:00");
    let _ = p.render();
    let _ = p.ui_tree();
    assert_eq!(p.now_ms(), t0);
    p.advance_ms(90 * 60_000);
    assert_eq!(find_id(&p, "com.android.systemui:id/clock").text, "10:30");
    p.tap(1, 1);
    assert!(p.now_ms() > t0 + 90 * 60_000);
}

#[test]
fn the_bundled_font_covers_the_symbols_the_screens_use() {
    for c in "←✎✕◁○□⌫↵✈−…·ÅöéÜ".chars() {
        assert!(render::has_glyph(c), "{c:?} missing from DejaVu Sans");
    }
}

#[derive(Debug, Clone)]
enum Action {
    Tap(i32, i32),
    LongPress(i32, i32),
    Swipe(i32, i32, i32, i32, u32),
    Text(String),
    Key(u32),
    Start(usize),
}

fn action() -> impl Strategy<Value = Action> {
    // Coordinates range past the screen on every side, to the extremes.
    let coord = prop_oneof![8 => -200i32..2700, 1 => Just(i32::MIN), 1 => Just(i32::MAX)];
    prop_oneof![
        6 => (coord.clone(), coord.clone()).prop_map(|(x, y)| Action::Tap(x, y)),
        1 => (coord.clone(), coord.clone()).prop_map(|(x, y)| Action::LongPress(x, y)),
        2 => (coord.clone(), coord.clone(), coord.clone(), coord, 0u32..1500)
            .prop_map(|(a, b, c, d, t)| Action::Swipe(a, b, c, d, t)),
        1 => prop::collection::vec(any::<char>(), 0..12).prop_map(|c| Action::Text(c.into_iter().collect())),
        1 => prop_oneof![Just(3u32), Just(4), Just(66), Just(67), Just(187), 0u32..300].prop_map(Action::Key),
        1 => (0usize..8).prop_map(Action::Start),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// No input sequence panics, and the tree stays inside the screen with
    /// every child inside its parent.
    #[test]
    fn random_input_never_panics(actions in prop::collection::vec(action(), 1..40), seed in 0u64..4) {
        let mut p = Phone::new(PhoneConfig { seed, ..PhoneConfig::default() });
        let packages = p.installed_packages();
        for a in actions {
            match a {
                Action::Tap(x, y) => p.tap(x, y),
                Action::LongPress(x, y) => p.long_press(x, y),
                Action::Swipe(a, b, c, d, t) => p.swipe(a, b, c, d, t),
                Action::Text(s) => p.input_text(&s),
                Action::Key(k) => p.key(Key::from_keycode(k)),
                Action::Start(i) => {
                    let _ = p.start_app(packages.get(i).map_or("x", String::as_str), None);
                }
            }
            let tree = p.ui_tree();
            check_nested(&tree, [0, 0, 1080, 2400]);
            prop_assert!(parse_uiautomator_xml(&to_uiautomator_xml(&tree)).is_ok());
        }
    }
}

#[test]
fn odd_screen_configs_work_everywhere() {
    for (width, height, density) in [
        (64, 64, 960),
        (8192, 300, 80),
        (480, 800, 160),
        (1440, 3200, 560),
        (0, 0, 0),
    ] {
        let mut p = Phone::new(PhoneConfig {
            width,
            height,
            density,
            seed: 1,
        });
        let (w, h) = p.size();
        for package in p.installed_packages() {
            let _ = p.start_app(&package, None);
            for (x, y) in [(w / 2, h / 2), (w / 4, h / 3), (w - 1, h - 1)] {
                p.tap(x as i32, y as i32);
                p.input_text("hi");
            }
            p.swipe(w as i32 / 2, h as i32 - 2, w as i32 / 2, 0, 200);
            let img = p.render();
            assert_eq!(img.dimensions(), (w, h));
            check_nested(&p.ui_tree(), [0, 0, w as i32, h as i32]);
        }
    }
}

fn check_nested(n: &UiNode, outer: [i32; 4]) {
    let [x1, y1, x2, y2] = n.bounds;
    assert!(
        x1 >= outer[0] && y1 >= outer[1] && x2 <= outer[2] && y2 <= outer[3],
        "{n:?} escapes {outer:?}"
    );
    assert!(x1 < x2 && y1 < y2, "{n:?} is empty");
    for (i, c) in n.children.iter().enumerate() {
        assert_eq!(c.index as usize, i);
        check_nested(c, n.bounds);
    }
}

/// Writes a PNG of each screen to `$BTL_PHONE_PNG_DIR` for a human to look
/// at: `BTL_PHONE_PNG_DIR=/tmp cargo test -p agent-core snapshot_pngs -- --ignored`.
#[test]
#[ignore = "writes files; run by hand to inspect the look"]
fn snapshot_pngs() {
    let dir = std::env::var("BTL_PHONE_PNG_DIR").unwrap_or_else(|_| "/tmp".into());
    let mut p = phone();
    let save = |p: &Phone, name: &str| p.render().save(format!("{dir}/phone_{name}.png")).unwrap();
    save(&p, "launcher");
    launch(&mut p, "Settings");
    save(&p, "settings");
    tap_text(&mut p, "Display");
    save(&p, "display");
    launch(&mut p, "Contacts");
    save(&p, "contacts");
    tap_id(&mut p, "fab_add");
    tap_id(&mut p, "name_field");
    p.input_text("Zoë");
    save(&p, "contact_form");
    p.key(Key::Home);
    launch(&mut p, "Notes");
    save(&p, "notes");
    launch(&mut p, "Clock");
    save(&p, "clock");
    tap_id(&mut p, "fab_add_alarm");
    save(&p, "alarm_editor");
    launch(&mut p, "Browser");
    tap_id(&mut p, "search_box");
    p.input_text("weather");
    p.key(Key::Enter);
    save(&p, "results");
    tap_id(&mut p, "result_item");
    save(&p, "page");
    launch(&mut p, "Gallery");
    save(&p, "gallery");
    let item = find_id(&p, "photo_item");
    let (x, y) = item.center();
    p.long_press(x, y);
    tap_id(&mut p, "delete_button");
    save(&p, "gallery_dialog");
    p.key(Key::AppSwitch);
    save(&p, "recents");
}
