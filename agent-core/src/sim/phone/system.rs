//! The phone's system services that are not screens: the simulated clock's
//! calendar, system properties (`getprop`) and the `settings` store.
//!
//! The `settings` keys that mirror an app switch are read from and written to
//! the typed [`SettingsState`] fields, never stored twice, so `settings get
//! global wifi_on` and the Wi-Fi switch cannot disagree.

use super::PhoneConfig;
use super::state::SettingsState;
use std::collections::BTreeMap;

/// The simulated clock's reading when a phone boots with seed 0:
/// Monday 2024-06-03 09:00:00 UTC. Other seeds start up to two hours later,
/// so the status bar differs between seeds without any wall clock.
pub const BOOT_EPOCH_MS: u64 = 1_717_405_200_000;

pub(crate) fn boot_time_ms(seed: u64) -> u64 {
    BOOT_EPOCH_MS + (seed % 120) * 60_000
}

/// `HH:MM` of a clock reading, in UTC (the phone's time zone).
pub(crate) fn clock_hhmm(ms: u64) -> String {
    let minutes = ms / 60_000;
    format!("{:02}:{:02}", (minutes / 60) % 24, minutes % 60)
}

/// `Mon, Jun 3` of a clock reading, as the launcher's date line shows it.
pub(crate) fn clock_date(ms: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = ms / 86_400_000;
    let (_, month, day) = civil_from_days(days);
    let weekday = WEEKDAYS[(days % 7) as usize];
    let month = MONTHS[(month as usize).saturating_sub(1).min(11)];
    format!("{weekday}, {month} {day}")
}

/// Year, month (1–12) and day of a count of days since 1970-01-01, by
/// Howard Hinnant's `civil_from_days`, so no date crate is needed.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `ro.product.model`, also shown in Settings › About phone.
pub(crate) const MODEL: &str = "BTL Virtual Phone";
/// `ro.build.version.release`.
pub(crate) const ANDROID_VERSION: &str = "14";
/// `ro.build.id`.
pub(crate) const BUILD_ID: &str = "UP1A.231005.007";

/// The system properties a freshly booted phone reports.
pub(crate) fn default_props(config: &PhoneConfig) -> BTreeMap<String, String> {
    let serial = format!("BTL{:08X}", config.seed as u32);
    [
        ("ro.product.brand", "btl".to_string()),
        ("ro.product.manufacturer", "BTL".to_string()),
        ("ro.product.model", MODEL.to_string()),
        ("ro.product.name", "btl_phone".to_string()),
        ("ro.product.device", "btl_phone".to_string()),
        ("ro.product.locale", "en-US".to_string()),
        ("ro.product.cpu.abi", "arm64-v8a".to_string()),
        ("ro.product.cpu.abilist", "arm64-v8a".to_string()),
        ("ro.build.version.release", ANDROID_VERSION.to_string()),
        ("ro.build.version.sdk", "34".to_string()),
        ("ro.build.id", BUILD_ID.to_string()),
        ("ro.build.type", "userdebug".to_string()),
        ("ro.build.tags", "test-keys".to_string()),
        (
            "ro.build.fingerprint",
            format!("btl/btl_phone/btl_phone:{ANDROID_VERSION}/{BUILD_ID}/1:userdebug/test-keys"),
        ),
        ("ro.hardware", "btl".to_string()),
        ("ro.serialno", serial),
        ("ro.sf.lcd_density", config.density.to_string()),
        ("ro.debuggable", "1".to_string()),
        ("sys.boot_completed", "1".to_string()),
        ("persist.sys.timezone", "UTC".to_string()),
        ("persist.sys.locale", "en-US".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The namespaces `settings` knows.
pub const SETTINGS_NAMESPACES: [&str; 3] = ["system", "secure", "global"];

/// The `settings` keys backed by typed [`SettingsState`] fields.
pub const SETTINGS_KEYS: [(&str, &str); 5] = [
    ("global", "wifi_on"),
    ("global", "bluetooth_on"),
    ("global", "airplane_mode_on"),
    ("secure", "location_mode"),
    ("system", "screen_brightness"),
];

/// The untyped keys a fresh phone has, by namespace.
pub(crate) fn default_settings_store(seed: u64) -> BTreeMap<String, BTreeMap<String, String>> {
    let android_id = format!("{:016x}", seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED);
    let entries: [(&str, &str, String); 11] = [
        ("global", "adb_enabled", "1".into()),
        ("global", "device_name", MODEL.into()),
        ("global", "stay_on_while_plugged_in", "0".into()),
        ("secure", "android_id", android_id),
        (
            "secure",
            "default_input_method",
            "com.btl.inputmethod/.KeyboardService".into(),
        ),
        (
            "secure",
            "enabled_input_methods",
            "com.btl.inputmethod/.KeyboardService".into(),
        ),
        ("system", "font_scale", "1.0".into()),
        ("system", "screen_brightness_mode", "0".into()),
        ("system", "screen_off_timeout", "60000".into()),
        ("system", "time_12_24", "24".into()),
        ("system", "accelerometer_rotation", "0".into()),
    ];
    let mut store: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (ns, key, value) in entries {
        store
            .entry(ns.to_string())
            .or_default()
            .insert(key.to_string(), value);
    }
    store
}

fn flag(b: bool) -> String {
    if b { "1" } else { "0" }.to_string()
}

pub(crate) fn settings_get(s: &SettingsState, namespace: &str, key: &str) -> Option<String> {
    match (namespace, key) {
        ("global", "wifi_on") => Some(flag(s.wifi)),
        ("global", "bluetooth_on") => Some(flag(s.bluetooth)),
        ("global", "airplane_mode_on") => Some(flag(s.airplane_mode)),
        ("secure", "location_mode") => Some(if s.location { "3" } else { "0" }.to_string()),
        ("system", "screen_brightness") => Some(s.brightness.to_string()),
        _ => s.store.get(namespace)?.get(key).cloned(),
    }
}

/// Stores `value`; for a typed key it must be an integer (booleans: nonzero
/// is on; brightness is clamped to 0–255) or the put is ignored, as the
/// framework ignores a value it cannot parse. Unknown namespaces are ignored.
pub(crate) fn settings_put(s: &mut SettingsState, namespace: &str, key: &str, value: &str) {
    if !SETTINGS_NAMESPACES.contains(&namespace) {
        return;
    }
    let int = value.trim().parse::<i64>().ok();
    match ((namespace, key), int) {
        (("global", "wifi_on"), Some(v)) => s.wifi = v != 0,
        (("global", "bluetooth_on"), Some(v)) => s.bluetooth = v != 0,
        (("global", "airplane_mode_on"), Some(v)) => s.airplane_mode = v != 0,
        (("secure", "location_mode"), Some(v)) => s.location = v != 0,
        (("system", "screen_brightness"), Some(v)) => s.brightness = v.clamp(0, 255) as u8,
        (typed, None) if SETTINGS_KEYS.contains(&typed) => {}
        _ => {
            s.store
                .entry(namespace.to_string())
                .or_default()
                .insert(key.to_string(), value.to_string());
        }
    }
}

/// Every key of a namespace with its value, sorted by key.
pub(crate) fn settings_list(s: &SettingsState, namespace: &str) -> Vec<(String, String)> {
    let mut out: BTreeMap<String, String> = s.store.get(namespace).cloned().unwrap_or_default();
    for (ns, key) in SETTINGS_KEYS {
        if ns == namespace
            && let Some(v) = settings_get(s, ns, key)
        {
            out.insert(key.to_string(), v);
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_of_the_boot_epoch() {
        assert_eq!(clock_hhmm(BOOT_EPOCH_MS), "09:00");
        assert_eq!(clock_date(BOOT_EPOCH_MS), "Mon, Jun 3");
        assert_eq!(clock_date(0), "Thu, Jan 1");
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }
}
