// Vulkan-Hpp plus the three VK_EXT_layer_settings types that llama.cpp's
// ggml-vulkan.cpp names, for Vulkan headers older than that extension
// (Debian bookworm ships 1.3.239). scripts/check-vulkan puts this directory
// on CPLUS_INCLUDE_PATH so it is found before the system header it wraps.
//
// ggml only ever chains the settings struct into VkInstanceCreateInfo and
// enables the validation layer it configures when the loader reports
// VK_EXT_layer_settings, so with old headers (and therefore no such layer)
// the struct is passed along and ignored. Its layout and sType follow the
// Vulkan registry's definition of VkLayerSettingsCreateInfoEXT.
#pragma once
#include_next <vulkan/vulkan.hpp>

#ifndef VK_EXT_layer_settings
#include <cstdint>
#include <vector>

namespace vk {

enum class LayerSettingTypeEXT : int32_t {
    eBool32 = 0,
    eInt32 = 1,
    eInt64 = 2,
    eUint32 = 3,
    eUint64 = 4,
    eFloat32 = 5,
    eFloat64 = 6,
    eString = 7,
};

struct LayerSettingEXT {
    const char *pLayerName;
    const char *pSettingName;
    LayerSettingTypeEXT type;
    uint32_t valueCount;
    const void *pValues;
};

struct LayerSettingsCreateInfoEXT {
    // VK_STRUCTURE_TYPE_LAYER_SETTINGS_CREATE_INFO_EXT
    int32_t sType = 1000496000;
    const void *pNext = nullptr;
    uint32_t settingCount = 0;
    const LayerSettingEXT *pSettings = nullptr;

    explicit LayerSettingsCreateInfoEXT(const std::vector<LayerSettingEXT> &settings)
        : settingCount(static_cast<uint32_t>(settings.size())), pSettings(settings.data()) {}
};

}  // namespace vk
#endif
